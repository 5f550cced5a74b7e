"""The SQLite store: one file, a connection per thread, writes serialised by SQLite's write lock.

Implements vault/storage/base.py. A write transaction is ``BEGIN IMMEDIATE`` (the write lock taken up front, so
no upgrade deadlock); a snapshot is a deferred read transaction, or joins the thread's open write transaction.
Deleted rows leave nothing readable: rows and summaries go under ``secure_delete=ON``, and the WAL is
checkpointed (truncated) after every delete, gc, shred and rewrap (threat_model.md, "Deletion").
"""

from __future__ import annotations

import hmac
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from vault.errors import IntegrityError, StorageError
from vault.storage.base import ListedRow, Progress, RowSeqs, StoredRow
from vault.storage.sqlite import schema
from vault.storage.sqlite.connections import TRANSLATE, Connections
from vault.storage.sqlite.schema import CHUNK_SHIFT, GC_BATCH, MAX_CHUNKS, blob, valid_seq


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

    @contextmanager
    def transaction(self) -> Iterator[SqliteWriteTx]:
        """A write transaction; commits when the block ends, rolls back when it raises."""
        connection = self._connections.acquire()
        try:
            with TRANSLATE:
                connection.execute("BEGIN IMMEDIATE")
            try:
                with TRANSLATE:
                    yield SqliteWriteTx(connection, self._ids_indexed)
            except BaseException:
                if connection.in_transaction:
                    connection.rollback()
                raise
            with TRANSLATE:
                connection.execute("COMMIT")
        finally:
            self._connections.release(connection)
        if self._scrub_pending:
            self.scrub()

    @contextmanager
    def snapshot(self) -> Iterator[SqliteReads]:
        """A read transaction; inside this thread's write transaction, that transaction."""
        connection = self._connections.acquire()
        try:
            if connection.in_transaction:
                yield SqliteReads(connection, self._ids_indexed)
                return
            with TRANSLATE:
                connection.execute("BEGIN DEFERRED")
            try:
                yield SqliteReads(connection, self._ids_indexed)
            finally:
                if connection.in_transaction:
                    with TRANSLATE:
                        connection.execute("COMMIT")
        finally:
            self._connections.release(connection)

    def query(self, sql: str, parameters: tuple = ()) -> list[tuple]:
        """One statement on this thread's connection (inside its open transaction, if any)."""
        connection = self._connections.acquire()
        try:
            with TRANSLATE:
                return connection.execute(sql, parameters).fetchall()
        finally:
            self._connections.release(connection)

    def get_meta(self, name: str) -> bytes | None:
        """A value from the meta table."""
        found = self.query("SELECT value FROM meta WHERE name = ?", (name,))
        return blob(found[0][0]) if found else None

    def is_empty(self) -> bool:
        """No rows, no key commitments: nothing a new vault id and index key could orphan."""
        return not self.query("SELECT 1 FROM rows UNION ALL SELECT 1 FROM owner_keys "
                              "UNION ALL SELECT 1 FROM meta WHERE name = 'index_key_check' LIMIT 1")

    def delete_row(self, seq: int, row_id: bytes) -> bool:
        """Delete one row, its summary and chunks, then scrub; False if that row is no longer there (deleted
        meanwhile; its seq may belong to a newer row)."""
        with self.transaction() as tx:
            found = tx.connection.execute("SELECT id FROM rows WHERE seq = ?", (seq,)).fetchone()
            if found is None or found[0] != row_id:
                return False
            _delete_seqs(tx.connection, [seq])
        self.scrub()
        return True

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
                _delete_seqs(tx.connection, seqs)
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


class SqliteReads:
    """The reads of one snapshot, on its connection."""

    __slots__ = ("_execute", "_ids_indexed", "connection")

    def __init__(self, connection: sqlite3.Connection, ids_indexed: bool) -> None:
        self.connection = connection
        self._execute = connection.execute
        self._ids_indexed = ids_indexed

    def find_row(self, row_id: bytes, seq: int) -> StoredRow | None:
        """The row with this id, whoever owns it. A file made before schema 3 finds it by its index on ids."""
        with TRANSLATE:
            if self._ids_indexed:
                found = self._execute(schema.SELECT_ROW_BY_ID, (row_id,)).fetchone()
            elif valid_seq(seq):
                found = self._execute(schema.SELECT_ROW_BY_SEQ, (seq,)).fetchone()
            else:
                return None
        # the id first: a stale id meeting another row, damaged or not, is a miss like any other
        if found is None or type(found[1]) is not bytes or not hmac.compare_digest(found[1], row_id):
            return None
        return schema.stored_row(found)

    def list_turn(self, owner_tag: bytes, turn_tag: bytes, now: float) -> list[tuple[StoredRow, bytes | None]]:
        """Unexpired rows of one owner's turn, each with its sealed summary (None if missing)."""
        with TRANSLATE:
            return schema.with_summaries(self._execute(schema.SELECT_TURN, (owner_tag, turn_tag, now)).fetchall())

    def list_turn_summaries(self, owner_tag: bytes, turn_tag: bytes, now: float,
                            row_seqs: RowSeqs) -> list[ListedRow]:
        """A listing's columns, oldest first, each row's id checked against its seq (unless ids are indexed)."""
        with TRANSLATE:
            found = self._execute(schema.SELECT_TURN_SUMMARIES, (owner_tag, turn_tag, now)).fetchall()
        for _seq, row_id, key_version, expires_at, size_bytes, sealed in found:
            schema.check_columns(key_version, expires_at, size_bytes)
            if type(row_id) is not bytes:
                raise IntegrityError("a stored row has columns of the wrong type")
            if type(sealed) is not bytes or not sealed:
                raise IntegrityError("a row's summary is missing")
        if not self._ids_indexed and row_seqs([row[1] for row in found]) != [row[0] for row in found]:
            raise IntegrityError("a listed row is not where its id says")  # moved or copied: no id reaches it
        return found

    def wrapped_key(self, seq: int) -> bytes:
        """The wrapped data key of row ``seq``."""
        with TRANSLATE:
            found = self._execute("SELECT wrapped_key FROM rows WHERE seq = ?", (seq,)).fetchone()
        if found is None:
            raise IntegrityError("a listed row disappeared inside one snapshot")
        return blob(found[0])

    def read_summary(self, seq: int) -> bytes | None:
        """The sealed summary of row ``seq``."""
        with TRANSLATE:
            found = self._execute("SELECT sealed FROM summaries WHERE seq = ?", (seq,)).fetchone()
        return None if found is None else blob(found[0])

    def read_chunks(self, seq: int, first: int, last: int) -> Iterator[tuple[int, bytes]]:
        """Sealed chunks ``first..last`` of row ``seq``, one at a time as the cursor steps."""
        base = seq << CHUNK_SHIFT
        with TRANSLATE:
            cursor = self._execute("SELECT pos, sealed FROM chunks WHERE pos BETWEEN ? AND ? ORDER BY pos",
                                   (base + first, base + last))
            try:
                for pos, sealed in cursor:
                    yield pos - base, blob(sealed)
            finally:  # whatever ends the read: a statement left active would hold its snapshot past COMMIT
                cursor.close()

    def turn_has_rows(self, owner_tag: bytes, turn_tag: bytes, now: float) -> bool:
        """Whether one owner's turn has an unexpired row (an index lookup)."""
        with TRANSLATE:
            return self._execute("SELECT 1 FROM rows WHERE owner_tag = ? AND turn_tag = ? AND expires_at > ? "
                                 "LIMIT 1", (owner_tag, turn_tag, now)).fetchone() is not None

    def owner_has_rows(self, owner_tag: bytes) -> bool:
        """Whether any row (expired or not) belongs to this owner tag."""
        with TRANSLATE:
            return self._execute("SELECT 1 FROM rows WHERE owner_tag = ? LIMIT 1", (owner_tag,)).fetchone() is not None


class SqliteWriteTx(SqliteReads):
    """The writes of one transaction, on its connection (statements run inside the store's TRANSLATE)."""

    __slots__ = ()

    def next_row(self, owner_tag: bytes, key_version: int) -> tuple[int, bytes | None]:
        """The next seq and the recorded commitment of the key version that will wrap the row, in one statement."""
        seq, commitment = self._execute(schema.NEXT_ROW, (owner_tag, key_version)).fetchone()
        if not valid_seq(seq):  # only a writer of the file puts a row at the last seq (2^43 - 1) or past it
            raise IntegrityError("a stored row's seq is out of range; no row can follow it")
        return seq, None if commitment is None else blob(commitment)

    def insert_chunk(self, seq: int, index: int, sealed: bytes) -> None:
        """Store one sealed chunk of row ``seq`` under its key ``seq << 20 | index``."""
        self._execute(schema.INSERT_CHUNK, ((seq << CHUNK_SHIFT) | index, sealed))

    def insert_row(self, row: StoredRow, sealed_summary: bytes) -> None:
        """Store a row's envelope and summary."""
        self._execute(schema.INSERT_SUMMARY, (row.seq, sealed_summary))
        self._execute(schema.INSERT_ROW, (row.seq, row.row_id, row.owner_tag, row.turn_tag, row.key_version,
                                          row.expires_at, row.size_bytes, row.wrapped_key, row.metadata))

    def update_expiry(self, seq: int, expires_at: float, metadata: bytes, sealed_summary: bytes) -> None:
        """Give row ``seq`` a new expiry with its re-sealed metadata and summary."""
        self._execute("UPDATE rows SET expires_at = ?, metadata = ? WHERE seq = ?", (expires_at, metadata, seq))
        self._execute("UPDATE summaries SET sealed = ? WHERE seq = ?", (sealed_summary, seq))

    def update_wrapped_key(self, seq: int, version: int, wrapped_key: bytes, sealed_summary: bytes | None) -> None:
        """Store a row's data key wrapped under ``version``, and its re-sealed summary (None: unchanged)."""
        self._execute("UPDATE rows SET key_version = ?, wrapped_key = ? WHERE seq = ?", (version, wrapped_key, seq))
        if sealed_summary is not None:
            self._execute("UPDATE summaries SET sealed = ? WHERE seq = ?", (sealed_summary, seq))

    def rows_to_rewrap(self, owner_tag: bytes, primary: int, limit: int) -> list[tuple[StoredRow, bytes | None]]:
        """Up to ``limit`` rows of an owner wrapped under another version than ``primary``."""
        return schema.with_summaries(self._execute(schema.SELECT_OLD_VERSION, (owner_tag, primary, limit)).fetchall())

    def put_meta(self, name: str, value: bytes) -> None:
        """Set a meta value."""
        self._execute("INSERT INTO meta (name, value) VALUES (?, ?)", (name, value))


class SqliteCommitments:
    """Key commitments and the owner registry (keys.KeyCommitments); writes join the thread's open transaction."""

    def __init__(self, store: SqliteStore) -> None:
        self._store = store

    def owner_commitments(self, owner_tag: bytes) -> dict[int, bytes]:
        """Stored key commitments of an owner, by version."""
        found = self._store.query("SELECT version, check_value FROM owner_keys WHERE owner_tag = ?", (owner_tag,))
        return {version: blob(value) for version, value in found}

    def record_owner_commitment(self, owner_tag: bytes, version: int, value: bytes, sealed_name: bytes) -> None:
        """Record an owner key commitment and register the owner."""
        self._atomic([("INSERT OR IGNORE INTO owner_keys (owner_tag, version, check_value) VALUES (?, ?, ?)",
                       (owner_tag, version, value)),
                      ("INSERT OR IGNORE INTO owners (owner_tag, sealed_name) VALUES (?, ?)",
                       (owner_tag, sealed_name))])

    def forget_owner_commitments(self, owner_tag: bytes, versions: set[int] | None) -> None:
        """Drop commitments of retired versions; None drops all of them and the owner's registration."""
        if versions is None:
            self._atomic([("DELETE FROM owner_keys WHERE owner_tag = ?", (owner_tag,)),
                          ("DELETE FROM owners WHERE owner_tag = ?", (owner_tag,))])
        else:
            self._atomic([("DELETE FROM owner_keys WHERE owner_tag = ? AND version = ?", (owner_tag, version))
                          for version in sorted(versions)])

    def registered_owners(self) -> list[tuple[bytes, bytes]]:
        """(owner tag, sealed name) of every registered owner."""
        return [(blob(tag), blob(name)) for tag, name in self._store.query("SELECT owner_tag, sealed_name FROM owners")]

    def key_versions_in_use(self, owner_tag: bytes) -> dict[int, int]:
        """How many rows (expired or not) each key version of an owner still wraps."""
        return dict(self._store.query(
            "SELECT key_version, count(*) FROM rows WHERE owner_tag = ? GROUP BY key_version", (owner_tag,)))

    def index_commitment(self) -> bytes | None:
        """The stored commitment of the index key."""
        return self._store.get_meta("index_key_check")

    def record_index_commitment(self, value: bytes) -> None:
        """Record the index key commitment."""
        self._atomic([("INSERT OR IGNORE INTO meta (name, value) VALUES ('index_key_check', ?)", (value,))])

    def _atomic(self, statements: list[tuple[str, tuple]]) -> None:
        """Run ``statements`` inside this thread's open transaction, else in a write transaction of their own."""
        store = self._store
        connection = store._connections.acquire()
        try:
            joined = connection.in_transaction
            if joined:
                with TRANSLATE:
                    for sql, parameters in statements:
                        connection.execute(sql, parameters)
        finally:
            store._connections.release(connection)
        if not joined:
            with store.transaction() as tx:
                for sql, parameters in statements:
                    tx.connection.execute(sql, parameters)


def _delete_seqs(connection: sqlite3.Connection, seqs: list[int]) -> None:
    """Delete rows with their summaries and chunks. Chunks go under secure_delete=FAST: their pages are not
    zeroed, and need not be, since their key goes with the row. Rows and summaries go under ON, which also
    zeroes pages and cells freed when the b-tree rebalances: FAST alone leaves copies of other rows' cells,
    wrapped keys included, in pages it frees (threat_model.md, "Deletion")."""
    ranges = [(seq << CHUNK_SHIFT, (seq << CHUNK_SHIFT) | (MAX_CHUNKS - 1)) for seq in seqs if valid_seq(seq)]
    connection.execute("PRAGMA secure_delete = FAST")
    try:
        connection.executemany("DELETE FROM chunks WHERE pos BETWEEN ? AND ?", ranges)
    finally:
        connection.execute("PRAGMA secure_delete = ON")
    connection.executemany("DELETE FROM summaries WHERE seq = ?", [(seq,) for seq in seqs])
    connection.executemany("DELETE FROM rows WHERE seq = ?", [(seq,) for seq in seqs])
