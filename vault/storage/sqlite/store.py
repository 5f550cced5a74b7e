"""The SQLite store: one file, a connection per thread, writes serialised by SQLite's write lock.

Implements vault/storage/base.py. A write transaction is ``BEGIN IMMEDIATE`` (the write lock taken up front, so
no upgrade deadlock), entered in turn, first come first served (writers.py); a snapshot is a deferred read
transaction, or joins the thread's open write transaction. Deleted rows leave nothing readable: rows and
summaries go under ``secure_delete=ON``, and the WAL is checkpointed (truncated) after every delete, gc, shred
and rewrap (threat_model.md, "Deletion"), in the same turn as the delete's commit where there is one. Puts keep
the disk reserve (space.py); a delete that meets a full file system releases the ballast and runs again, gc and
shred then go on in small batches, each checkpointed, so the WAL never needs more than one small batch's pages.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from vault.errors import StorageError
from vault.storage.base import Progress
from vault.storage.sql.values import blob
from vault.storage.sqlite import schema
from vault.storage.sqlite.commitments import SqliteCommitments
from vault.storage.sqlite.connections import TRANSLATE, Connections, FileSystemFull
from vault.storage.sqlite.deletes import delete_seqs
from vault.storage.sqlite.rows import SqliteReads
from vault.storage.sqlite.schema import GC_BATCH, MAX_CHUNKS
from vault.storage.sqlite.space import REUSABLE, DiskSpace, put_needs
from vault.storage.sqlite.writers import Writers
from vault.storage.sqlite.writes import SqliteWriteTx

__all__ = ["SqliteCommitments", "SqliteReads", "SqliteStore", "SqliteWriteTx"]
log = logging.getLogger("scratchvault")
T = TypeVar("T")
FULL_DISK_BATCH = 50  # rows per gc or shred batch once the file system is full (each batch then checkpointed)


class SqliteStore:
    """A vault's rows, chunks, summaries and key commitments in one SQLite file."""

    max_chunks = MAX_CHUNKS

    def __init__(self, path: Path, disk_reserve_bytes: int | None = None) -> None:
        self._connections = Connections(path)
        self._writers = Writers(path)
        self.space = DiskSpace(path, disk_reserve_bytes)
        self._scrub_pending = False
        self._ids_indexed = False
        self.commitments = SqliteCommitments(self)
        with self.transaction() as tx:
            self._ids_indexed = schema.migrate(tx.connection)
            largest, row = tx.connection.execute("SELECT (SELECT coalesce(max(length(body)), 0) FROM deletions), "
                                                 "(SELECT coalesce(max(size_bytes), 0) FROM rows)").fetchone()
        self.space.note_record(largest if type(largest) is int else 0)
        self.space.note_row(row if type(row) is int else 0)

    def transaction(self) -> SqliteWriteTx:
        """A write transaction; commits when the block ends, rolls back when it raises."""
        return SqliteWriteTx(self._connections, self._ids_indexed, self._after_commit, self._writers, self.space)

    def snapshot(self) -> SqliteReads:
        """A read transaction; inside this thread's write transaction, that transaction."""
        return SqliteReads(self._connections, self._ids_indexed)

    def _after_commit(self, deleted: bool) -> None:
        if self._scrub_pending or deleted:  # a delete is checkpointed right after its commit, in its turn
            self.scrub()

    def query(self, sql: str, parameters: tuple | Mapping[str, object] = ()) -> list[tuple]:
        """One statement on this thread's connection (inside its open transaction, if any)."""
        connection = self._connections.acquire()
        try:
            with TRANSLATE:
                return connection.execute(sql, parameters).fetchall()
        finally:
            self._connections.release(connection)

    def in_transaction(self) -> bool:
        """Whether this thread has a transaction open."""
        connection = self._connections.acquire()
        try:
            return connection.in_transaction
        finally:
            self._connections.release(connection)

    def atomic(self, statements: list[tuple[str, tuple]]) -> None:
        """Run ``statements`` inside this thread's open transaction, else in a write transaction of their own."""

        def run(connection: sqlite3.Connection) -> None:
            for sql, parameters in statements:
                connection.execute(sql, parameters)

        self.within(run)

    def within(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work`` on the connection of this thread's open transaction, else in a write transaction of its own."""
        connection = self._connections.acquire()
        try:
            if connection.in_transaction:
                with TRANSLATE:
                    return work(connection)
        finally:
            self._connections.release(connection)
        with self.transaction() as tx:
            return work(tx.connection)

    def get_meta(self, name: str) -> bytes | None:
        """A value from the meta table."""
        found = self.query("SELECT value FROM meta WHERE name = ?", (name,))
        return blob(found[0][0]) if found else None

    def is_empty(self) -> bool:
        """No rows, key commitments or deletion ledgers: nothing a new vault id and index key could orphan."""
        return not self.query("SELECT 1 FROM rows UNION ALL SELECT 1 FROM owner_keys UNION ALL SELECT 1 FROM deletions "
                              "UNION ALL SELECT 1 FROM meta WHERE name = 'index_key_check' LIMIT 1")

    def check_space(self, size_hint: int) -> None:
        """Refuse a put of about ``size_hint`` bytes that would pass the disk reserve (before it waits for the
        write lock), and refill the ballast. Only when the file system alone is short are the file's free pages
        counted, and then the WAL checkpointed and truncated: moved into the file, its frames no longer count as
        growth to come, and its own space comes back."""
        if self.space.skip_small(size_hint):
            return
        room, log_bytes = self.space.room(), self.space.log_bytes()
        needs = put_needs(size_hint, log_bytes, 0)
        self.space.seen(room, needs)
        if room.spare(needs) < 0:
            reusable = self._reusable()
            if log_bytes and room.spare(put_needs(size_hint, log_bytes, reusable)) < 0:
                self.scrub()
                room, log_bytes, reusable = self.space.room(), self.space.log_bytes(), self._reusable()
            room.refuse_if_short(put_needs(size_hint, log_bytes, reusable))
        self.space.refill(room)

    def _reusable(self) -> int:
        """Bytes of free pages in the file (left by deletes), which new rows take before the file grows."""
        return self.query(REUSABLE)[0][0]

    def deleting(self, work: Callable[[SqliteWriteTx], T]) -> T:
        """``work``, a write that only removes, in a write transaction; on a full file system, once more in a new
        one after releasing the ballast (then the WAL is checkpointed and the ballast held again if it fits)."""
        try:
            with self.transaction() as tx:
                return work(tx)
        except FileSystemFull:
            self._make_room()
        with self.transaction() as tx:
            done = work(tx)
        self._room_made()
        return done

    def _make_room(self) -> None:
        """A delete met a full file system: release the ballast and checkpoint, so the WAL has room again."""
        released = self.space.release_ballast()
        log.warning("scratchvault: the database's file system is full; %s so deletes can run",
                    "released the ballast" if released else "no ballast left to release")
        self.scrub()

    def _room_made(self) -> None:
        """After a delete that needed the ballast: checkpoint (its pages return to the file system) and hold the
        ballast again if the space is there, ready for the next time the file system fills up."""
        self.scrub()
        self.space.refill(self.space.room())

    def delete_expired(self, now: float, progress: Progress = None) -> int:
        """Delete every row that expired at or before ``now``, in batches; returns how many."""
        return self._delete_in_batches(schema.EXPIRED_BATCH, now, progress)

    def delete_owner_rows(self, owner_tag: bytes, progress: Progress = None) -> int:
        """Delete every row of an owner, in batches; returns how many."""
        return self._delete_in_batches(schema.OWNER_BATCH, owner_tag, progress)

    def _delete_in_batches(self, select: str, key: object, progress: Callable[[int], None] | None) -> int:
        """Delete the rows ``select`` finds, GC_BATCH per committed transaction (other writers get the lock in
        between), then scrub (after the last batch's commit, in its turn); ``progress`` gets the running total
        after each batch. A full file system makes room (the ballast) and the rest goes FULL_DISK_BATCH at a time,
        each batch checkpointed, halved each time its WAL still does not fit, down to one row (the ballast is sized
        for the largest row's delete: space.note_row)."""
        removed, batch, full = 0, GC_BATCH, False
        while True:
            try:
                with self.transaction() as tx:
                    seqs = [seq for (seq,) in tx.connection.execute(select, (key, batch))]
                    delete_seqs(tx.connection, seqs)
                    last = len(seqs) < batch
                    if last and removed + len(seqs):
                        self._scrub_pending = True
            except FileSystemFull:
                if full and batch == 1:
                    raise
                if full:  # the batch's WAL did not fit: halve it, down to one row (the ballast holds a row's)
                    self.scrub()
                else:
                    self._make_room()
                batch, full = max(1, min(batch, FULL_DISK_BATCH) // (2 if full else 1)), True
                continue
            removed += len(seqs)
            if progress is not None:
                progress(removed)
            if full:
                self.scrub()  # the WAL's pages go back to the file system before the next batch needs some
            if last:
                break
        if full:
            self._room_made()
        return removed

    def stats(self, now: float) -> dict[str, Any]:
        """Row and byte counts (all rows, and by key version), rows expired but not yet collected, and the disk."""
        rows, size, expired = self.query(schema.COUNTS, (now,))[0]
        by_version = self.query("SELECT key_version, count(*), coalesce(sum(size_bytes), 0) FROM rows "
                                "GROUP BY key_version ORDER BY key_version")
        return {"rows": rows, "bytes": size, "expired_rows": expired,
                "by_key_version": {version: {"rows": count, "bytes": total} for version, count, total in by_version},
                "disk": self.space.report()}

    def scrub(self) -> None:
        """Checkpoint the WAL into the file and truncate it (old page images would linger there), in a writer's
        turn (a checkpoint takes SQLite's write lock). A reader can keep it from finishing: it then waits only
        briefly and stays pending, retried after the next write and on close, rather than stalling or failing
        the call whose changes are already committed."""
        try:
            self._writers.acquire()
        except StorageError:
            self._scrub_pending = True
            return
        try:
            self._checkpoint()
        finally:
            self._writers.release()

    def _checkpoint(self) -> None:
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
        self._writers.close()
        self._connections.close()
