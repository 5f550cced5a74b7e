"""The PostgreSQL store: the vault's tables on a server several hosts share; encryption stays on the client.

Implements vault/storage/base.py. No global writer lock: writers of different owners run side by side (rows.py).
Deleted rows are NotFound at once; what PostgreSQL keeps of them (dead tuples until VACUUM, WAL, archives,
replicas, base backups) is unreadable only once the key that wrapped them is destroyed (threat_model.md,
"PostgreSQL"): scrub is a no-op here, since no VACUUM can reach those copies.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from typing import Any, TypeVar

from vault.errors import StorageError
from vault.storage.base import Progress
from vault.storage.postgres import citus, sql
from vault.storage.postgres.commitments import PostgresCommitments
from vault.storage.postgres.connections import TRANSLATE, Pool, is_retryable
from vault.storage.postgres.rows import PgReads
from vault.storage.postgres.schema import LOCK_CLASS, META_LOCK, migrate
from vault.storage.postgres.writes import PgWriteTx, delete_batch
from vault.storage.sql.values import blob

T = TypeVar("T")
MAX_CHUNKS = 1 << 20  # chunks per row, as on SQLite (a row of 64 GiB), so a vault moves between the two
GC_BATCH = 2000
WRITE_ATTEMPTS = 4  # a delete, gc batch or shred step that meets a deadlock or serialization failure runs again
DEFAULT_POOL_SIZE = 8


class PostgresStore:
    """A vault's rows, chunks, summaries and key commitments in one PostgreSQL schema."""

    max_chunks = MAX_CHUNKS

    def __init__(self, url: str, pool_size: int = DEFAULT_POOL_SIZE) -> None:
        self.pool = Pool(url, pool_size)
        self._local = threading.local()
        self.commitments = PostgresCommitments(self)
        self.schema: str | None = None  # the schema of the vault's tables (quoted), known once migrate ran
        self.sharded = False  # on a Citus coordinator: an owner's records on one worker (citus.py)
        try:
            with self.transaction() as tx:
                tx._run("SELECT 1")
                with TRANSLATE:
                    self.schema = migrate(tx.connection)
                    self.sharded = citus.has_citus(tx.connection)
        except BaseException:
            self.pool.close()
            raise

    def __repr__(self) -> str:
        return "PostgresStore(<url not shown>)"

    # -- transactions ------------------------------------------------------------------------------------------------
    def open_transaction(self) -> PgReads | None:
        """This thread's open write transaction, if any."""
        return getattr(self._local, "tx", None)

    def set_transaction(self, tx: PgReads | None) -> None:
        self._local.tx = tx

    def set_snapshot(self, reads: PgReads | None) -> None:
        """Record (None: forget) this thread's open read snapshot."""
        self._local.reads = reads

    def transaction(self) -> PgWriteTx:
        """A write transaction (READ COMMITTED; per-owner locks); commits when the block ends."""
        return PgWriteTx(self)

    def snapshot(self) -> AbstractContextManager[PgReads]:
        """A read snapshot (REPEATABLE READ READ ONLY); inside this thread's write transaction, that transaction;
        inside its open snapshot, that snapshot."""
        reads = getattr(self._local, "reads", None)
        if reads is not None and self.open_transaction() is None:
            return nullcontext(reads)
        return PgReads(self)

    def query(self, statement: str, parameters: Any = ()) -> list[tuple]:
        """One statement inside this thread's open transaction or snapshot, else in a snapshot of its own. A read
        loading its owner's keys so never takes a second connection while it holds one: with as many such reads
        at once as the pool has connections, each would wait for the others until the pool's timeout."""
        joined = self.open_transaction() or getattr(self._local, "reads", None)
        if joined is not None:
            return joined._all(statement, parameters)
        with self.snapshot() as reads:
            return reads._all(statement, parameters)

    # -- the vault's calls ---------------------------------------------------------------------------------------
    def get_meta(self, name: str) -> bytes | None:
        """A value from the meta table; the vault id, inside a write transaction, under the meta lock, so two
        hosts opening one new database make one vault id, not two."""
        joined = self.open_transaction()
        if name == "vault_id" and isinstance(joined, PgWriteTx):
            joined._run("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_CLASS, META_LOCK))
        found = self.query("SELECT value FROM meta WHERE name = %s", (name,))
        return blob(found[0][0]) if found else None

    def is_empty(self) -> bool:
        """No rows, key commitments or deletion ledgers."""
        return not self.query(sql.IS_EMPTY)[0][0]

    def check_space(self, size_hint: int) -> None:
        """The server keeps its own disk: nothing to check from here (a full disk is a QuotaExceeded on write)."""
        if self.pool.closed:
            raise StorageError("the vault is closed")

    def deleting(self, work: Callable[[PgWriteTx], T]) -> T:
        """``work``, a write that only removes, in a write transaction; run again from the start after a deadlock
        or serialization failure (the transaction was rolled back)."""
        for attempt in range(WRITE_ATTEMPTS):
            try:
                with self.transaction() as tx:
                    return work(tx)
            except StorageError as error:
                if not is_retryable(error) or attempt == WRITE_ATTEMPTS - 1:
                    raise
                time.sleep(0.01 * (attempt + 1))
        raise AssertionError("unreachable")

    def delete_expired(self, now: float, progress: Progress = None) -> int:
        """Delete every row expired at ``now``, GC_BATCH per transaction; returns how many. Sharded, owner by owner
        (a statement that locks rows must stay on one worker), the owners from one statement over every shard."""
        if not self.sharded:
            return self._delete_in_batches(sql.DELETE_EXPIRED_BATCH, {"now": now}, progress)
        removed = 0
        for (owner_tag,) in self.query(sql.EXPIRED_OWNERS, (now,)):
            owner_progress = None if progress is None else partial(_progress_after, progress, removed)
            removed += self._delete_in_batches(sql.DELETE_OWNER_BATCH, {"tag": blob(owner_tag), "now": now},
                                               owner_progress)
        return removed

    def delete_owner_rows(self, owner_tag: bytes, progress: Progress = None) -> int:
        """Delete every row of an owner, GC_BATCH per transaction; returns how many."""
        return self._delete_in_batches(sql.DELETE_OWNER_BATCH, {"tag": owner_tag, "now": None}, progress)

    def _delete_in_batches(self, select: str, picked_by: dict[str, object], progress: Progress) -> int:
        """Batches of rows ``select`` finds by ``picked_by`` (locked, skipping those another host is deleting),
        each committed and each starting after the last seq of the one before."""
        removed, after = 0, 0
        while True:
            count, after = self.deleting(partial(delete_batch, statement=select, picked_by=picked_by, after=after,
                                                 size=GC_BATCH))
            removed += count
            if progress is not None:
                progress(removed)
            if count < GC_BATCH:
                return removed

    def stats(self, now: float) -> dict[str, Any]:
        """Row and byte counts (all rows, and by key version), rows expired but not yet collected; ``disk`` has
        no sizes to show (None: the server's disk is not visible from here; doctor shows the database's size)."""
        rows, size, expired = self.query(sql.COUNTS, (now,))[0]
        by_version = self.query(sql.BY_VERSION)
        return {"rows": rows, "bytes": size, "expired_rows": expired,
                "by_key_version": {version: {"rows": count, "bytes": total} for version, count, total in by_version},
                "disk": {"free_bytes": None, "reserve_bytes": 0, "ballast_bytes": 0, "file_system_bytes": None}}

    def scrub(self) -> None:
        """Nothing: PostgreSQL's copies of deleted rows (dead tuples, WAL, archives, replicas) are beyond what a
        client can wipe; they become unreadable when their key is destroyed (threat_model.md, "PostgreSQL")."""

    def close(self) -> None:
        """Close the pool; later calls raise StorageError."""
        self.pool.close()


def _progress_after(progress: Callable[[int], None], before: int, count: int) -> None:
    """Report ``count`` more rows removed after ``before`` (one owner's batches, in a run over many)."""
    progress(before + count)
