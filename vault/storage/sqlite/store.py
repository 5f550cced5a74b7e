"""The SQLite store: one file, a connection per thread, writes serialised by SQLite's write lock.

Implements vault/storage/base.py. A write transaction is ``BEGIN IMMEDIATE`` (the write lock taken up front, so
no upgrade deadlock); a snapshot is a deferred read transaction, or joins the thread's open write transaction.
Deleted rows leave nothing readable: rows and summaries go under ``secure_delete=ON``, and the WAL is
checkpointed (truncated) after every delete, gc, shred and rewrap (threat_model.md, "Deletion").
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from vault.errors import StorageError
from vault.storage.base import Progress
from vault.storage.sqlite import schema
from vault.storage.sqlite.commitments import SqliteCommitments
from vault.storage.sqlite.connections import TRANSLATE, Connections
from vault.storage.sqlite.rows import SqliteReads, SqliteWriteTx, delete_seqs
from vault.storage.sqlite.schema import GC_BATCH, MAX_CHUNKS, blob

__all__ = ["SqliteCommitments", "SqliteReads", "SqliteStore", "SqliteWriteTx"]


class SqliteStore:
    """A vault's rows, chunks, summaries and key commitments in one SQLite file."""

    max_chunks = MAX_CHUNKS

    def __init__(self, path: Path) -> None:
        self._connections = Connections(path)
        self._scrub_pending = False
        self._ids_indexed = False
        self.commitments = SqliteCommitments(self)
        with self.transaction() as tx:
            self._ids_indexed = schema.migrate(tx.connection)

    def transaction(self) -> SqliteWriteTx:
        """A write transaction; commits when the block ends, rolls back when it raises."""
        return SqliteWriteTx(self._connections, self._ids_indexed, self._after_commit)

    def snapshot(self) -> SqliteReads:
        """A read transaction; inside this thread's write transaction, that transaction."""
        return SqliteReads(self._connections, self._ids_indexed)

    def _after_commit(self) -> None:
        if self._scrub_pending:
            self.scrub()

    def query(self, sql: str, parameters: tuple = ()) -> list[tuple]:
        """One statement on this thread's connection (inside its open transaction, if any)."""
        connection = self._connections.acquire()
        try:
            with TRANSLATE:
                return connection.execute(sql, parameters).fetchall()
        finally:
            self._connections.release(connection)

    def atomic(self, statements: list[tuple[str, tuple]]) -> None:
        """Run ``statements`` inside this thread's open transaction, else in a write transaction of their own."""
        connection = self._connections.acquire()
        try:
            joined = connection.in_transaction
            if joined:
                with TRANSLATE:
                    for sql, parameters in statements:
                        connection.execute(sql, parameters)
        finally:
            self._connections.release(connection)
        if not joined:
            with self.transaction() as tx:
                for sql, parameters in statements:
                    tx.connection.execute(sql, parameters)

    def get_meta(self, name: str) -> bytes | None:
        """A value from the meta table."""
        found = self.query("SELECT value FROM meta WHERE name = ?", (name,))
        return blob(found[0][0]) if found else None

    def is_empty(self) -> bool:
        """No rows, key commitments or deletion ledgers: nothing a new vault id and index key could orphan."""
        return not self.query("SELECT 1 FROM rows UNION ALL SELECT 1 FROM owner_keys UNION ALL SELECT 1 FROM deletions "
                              "UNION ALL SELECT 1 FROM meta WHERE name = 'index_key_check' LIMIT 1")

    def delete_expired(self, now: float, progress: Progress = None) -> int:
        """Delete every row that expired at or before ``now``, in batches; returns how many."""
        return self._delete_in_batches(schema.EXPIRED_BATCH, now, progress)

    def delete_owner_rows(self, owner_tag: bytes, progress: Progress = None) -> int:
        """Delete every row of an owner, in batches; returns how many."""
        return self._delete_in_batches(schema.OWNER_BATCH, owner_tag, progress)

    def _delete_in_batches(self, select: str, key: object, progress: Callable[[int], None] | None) -> int:
        """Delete the rows ``select`` finds, GC_BATCH per committed transaction (other writers get the lock in
        between), then scrub; ``progress`` gets the running total after each batch."""
        removed = 0
        while True:
            with self.transaction() as tx:
                seqs = [seq for (seq,) in tx.connection.execute(select, (key, GC_BATCH))]
                delete_seqs(tx.connection, seqs)
            removed += len(seqs)
            if progress is not None:
                progress(removed)
            if len(seqs) < GC_BATCH:
                break
        if removed:
            self.scrub()
        return removed

    def stats(self, now: float) -> dict[str, Any]:
        """Row and byte counts (all rows, and by key version), and rows expired but not yet collected."""
        rows, size, expired = self.query(schema.COUNTS, (now,))[0]
        by_version = self.query("SELECT key_version, count(*), coalesce(sum(size_bytes), 0) FROM rows "
                                "GROUP BY key_version ORDER BY key_version")
        return {"rows": rows, "bytes": size, "expired_rows": expired,
                "by_key_version": {version: {"rows": count, "bytes": total} for version, count, total in by_version}}

    def scrub(self) -> None:
        """Checkpoint the WAL into the file and truncate it (old page images would linger there). A reader can
        keep it from finishing: it then waits only briefly and stays pending, retried after the next write and
        on close, rather than stalling or failing the call whose changes are already committed."""
        try:
            connection = self._connections.acquire()
        except StorageError:
            self._scrub_pending = True
            return
        try:
            with TRANSLATE:
                connection.execute("PRAGMA busy_timeout = 200")
                try:
                    busy = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
                finally:
                    connection.execute("PRAGMA busy_timeout = 30000")
        except StorageError:
            busy = True
        finally:
            self._connections.release(connection)
        self._scrub_pending = bool(busy)

    def close(self) -> None:
        """Finish a pending scrub, then close every thread's connection; later calls raise StorageError."""
        if self._scrub_pending and not self._connections.closed:
            self.scrub()
        self._connections.close()
