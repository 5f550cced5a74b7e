"""A SQLite write transaction: a context manager on this thread's connection that holds the file's write lock, and
the writes made inside it (its reads are the snapshot's, ``rows.py``)."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING

from keys import EPOCH_WRAPPED_SIZE, SealedLedger
from vault.errors import IntegrityError
from vault.storage.base import RowAt, StoredRow
from vault.storage.sql import values
from vault.storage.sql.values import blob, with_summaries
from vault.storage.sqlite import schema
from vault.storage.sqlite.connections import TRANSLATE, Connections
from vault.storage.sqlite.deletes import delete_seqs, secure_delete_fast
from vault.storage.sqlite.rows import SqliteReads
from vault.storage.sqlite.schema import CHUNK_SHIFT, MAX_CHUNKS, MAX_SEQ, valid_seq
from vault.storage.sqlite.space import CHECK_EVERY, REUSABLE, put_needs
from vault.storage.sqlite.writers import Writers

if TYPE_CHECKING:
    from vault.storage.sqlite.space import DiskSpace


class SqliteWriteTx(SqliteReads):
    """A write transaction (``BEGIN IMMEDIATE``: the write lock up front, so no upgrade deadlock) and its writes.
    It waits for its turn among writers first (writers.py: first come first served, where SQLite's busy handler
    is not). It commits when the block ends; an error inside rolls it back (a failed COMMIT too, as SQLite
    advises) and leaves as its VaultError. ``committed`` runs after each commit, the turn still held. With
    ``space``, a row's chunks and the row itself are refused (QuotaExceeded) when they would pass the disk
    reserve: checked every CHECK_EVERY chunks and before the row goes in (the put checked once more before it
    took the write lock)."""

    __slots__ = ("_committed", "_deleted", "_first_chunk", "_log_before", "_space", "_writers", "_written")

    def __init__(self, connections: Connections, ids_indexed: bool, committed: Callable[[bool], None],
                 writers: Writers, space: DiskSpace | None = None) -> None:
        super().__init__(connections, ids_indexed)
        self._writers = writers
        self._committed = committed
        self._deleted = False  # a row went: checkpointed after the commit, before the turn is given back
        self._space = space
        self._written = 0
        self._log_before: int | None = None
        self._first_chunk: tuple[int, bytes] | None = None  # (seq, sealed): kept for its row, if it is the only one

    def __enter__(self) -> SqliteWriteTx:
        self._writers.acquire()
        try:
            self._begin("BEGIN IMMEDIATE", join=False)
        except BaseException:
            self._writers.release()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: object) -> None:
        connection = self.connection
        try:
            try:
                if error is None:
                    try:
                        with TRANSLATE:
                            connection.execute("COMMIT")
                    except BaseException:
                        _roll_back(connection)
                        raise
                else:
                    _roll_back(connection)
                    TRANSLATE.__exit__(kind, error, trace)  # a sqlite3 error leaves as its VaultError
                    return
            finally:
                self._connections.release(connection)
            self._committed(self._deleted)
        finally:
            self._writers.release()

    def next_seq_and_commitments(self, owner_tag: bytes, key_version: int,
                                 epoch: tuple[int, int] = (0, 0)) -> tuple[int, bytes | None, bytes | None]:
        """The next seq, and the recorded commitments of the key version and epoch key that will seal the row (None:
        not, or no longer, recorded), in one statement."""
        seq, commitment, epoch_check = self._execute(schema.NEXT_ROW, (owner_tag, key_version, *epoch)).fetchone()
        if not valid_seq(seq):  # only a writer of the file puts a row at the last seq (2^43 - 1) or past it
            raise IntegrityError("a stored row's seq is out of range; no row can follow it")
        return seq, None if commitment is None else blob(commitment), None if epoch_check is None else blob(epoch_check)

    def insert_chunk(self, row: RowAt, index: int, sealed: bytes) -> None:
        """Store one sealed chunk of a row under its key ``seq << 20 | index`` (the file is one owner's or many's
        alike: chunks are found by seq)."""
        seq = row.seq
        if not 0 <= index < MAX_CHUNKS:  # else it would land in the next seq's chunks
            raise IntegrityError("chunk index out of range")
        self._written += len(sealed)
        if index and index % CHECK_EVERY == 0:  # the put checked before the write lock; insert_row checks last
            self._check_space()
        self._flush_first_chunk()
        if index == 0:  # held back: it goes into the row if no second chunk follows
            self._first_chunk = (seq, sealed)
            return
        self._execute(schema.INSERT_CHUNK, ((seq << CHUNK_SHIFT) | index, sealed))

    def _flush_first_chunk(self) -> None:
        """Store the chunk held back for the row in ``chunks``: a second chunk came, so its row has more than one."""
        if self._first_chunk is not None:
            seq, sealed = self._first_chunk
            self._first_chunk = None
            self._execute(schema.INSERT_CHUNK, (seq << CHUNK_SHIFT, sealed))

    def insert_row(self, row: StoredRow, sealed_summary: bytes) -> None:
        """Store a row's envelope and summary, with its chunk if it has only one (the ballast grows with the
        largest row: deleting it must fit)."""
        self._check_space()
        if self._space is not None:
            self._space.note_row(row.size_bytes)
        only_chunk = None
        if self._first_chunk is not None and self._first_chunk[0] == row.seq:
            only_chunk, self._first_chunk = self._first_chunk[1], None
        self._flush_first_chunk()  # another row's (never made by a put): where any chunk of a row goes
        self._execute(schema.INSERT_ROW, (row.seq, row.row_id, row.owner_tag, row.turn_tag, row.key_version,
                                          row.expires_at, row.size_bytes, row.wrapped_key, row.metadata,
                                          sealed_summary, only_chunk))

    def _check_space(self) -> None:
        """QuotaExceeded when this transaction's row would pass the disk reserve (never without a ``space``)."""
        if self._space is None or self._space.skip_small(self._written):
            return
        if self._log_before is None:  # the WAL as this transaction found it, before its own frames
            self._log_before = self._space.log_bytes()
        room = self._space.room()
        if room.spare(put_needs(self._written, self._log_before, 0)) < 0:  # the file's free pages may make room
            # counted as they are now, some taken by this row already: never more than there were
            room.refuse_if_short(put_needs(self._written, self._log_before, self._execute(REUSABLE).fetchone()[0]))

    def update_expiry(self, row: RowAt, expires_at: float, wrapped_key: bytes, metadata: bytes,
                      sealed_summary: bytes) -> None:
        """Give a row a new expiry with its data key wrapped for its new epoch and its re-sealed records."""
        seq = row.seq
        self._execute("UPDATE rows SET expires_at = ?, wrapped_key = ?, metadata = ?, summary = ? WHERE seq = ?",
                      (expires_at, wrapped_key, metadata, sealed_summary, seq))
        self._execute(schema.DELETE_OLD_SUMMARY, (seq,))

    def update_wrapped_key(self, row: RowAt, version: int, wrapped_key: bytes, sealed_summary: bytes | None) -> None:
        """Store a row's data key wrapped under ``version``, and its re-sealed summary (None: unchanged)."""
        seq = row.seq
        if sealed_summary is None:
            self._execute("UPDATE rows SET key_version = ?, wrapped_key = ? WHERE seq = ?",
                          (version, wrapped_key, seq))
            return
        self._execute("UPDATE rows SET key_version = ?, wrapped_key = ?, summary = ? WHERE seq = ?",
                      (version, wrapped_key, sealed_summary, seq))
        self._execute(schema.DELETE_OLD_SUMMARY, (seq,))

    def rows_to_rewrap(self, owner_tag: bytes, primary: int, limit: int) -> list[tuple[StoredRow, bytes | None]]:
        """Up to ``limit`` rows of an owner wrapped under another version than ``primary``, or under no epoch."""
        found = self._execute(schema.SELECT_OLD_VERSION, (owner_tag, primary, EPOCH_WRAPPED_SIZE, limit)).fetchall()
        return with_summaries(found, MAX_SEQ)

    def owner_usage(self, owner_tag: bytes) -> tuple[int, int]:
        """(rows, bytes) an owner has stored, expired rows not yet collected included (an index-only count)."""
        with TRANSLATE:
            rows, size = self._execute(schema.OWNER_USAGE, (owner_tag,)).fetchone()
        if type(rows) is not int or type(size) is not int:
            raise IntegrityError("a stored row has columns of the wrong type")
        return rows, size

    def put_meta(self, name: str, value: bytes) -> None:
        """Set a meta value."""
        self._execute("INSERT INTO meta (name, value) VALUES (?, ?)", (name, value))

    def delete_row(self, row: StoredRow) -> float | None:
        """Delete one row, its summary and chunks; returns the expiry it had, or None if the row at its seq no
        longer stores its id."""
        seq, row_id = row.seq, row.row_id
        found = self._execute("SELECT id, expires_at FROM rows WHERE seq = ?", (seq,)).fetchone()
        if found is None or found[0] != row_id:
            return None
        values.check_columns(1, found[1], 0)
        delete_seqs(self.connection, [seq])
        self._deleted = True
        return found[1]

    def put_ledger(self, owner_tag: bytes, ledger: SealedLedger) -> None:
        """Store (or replace) the owner's deletion ledger. Under secure_delete=FAST: it holds no secret (row ids
        and expiries, authenticated), so its old pages need not be zeroed, which halves what a delete on a full
        disk writes to the WAL for it."""
        with secure_delete_fast(self.connection):
            self._execute("INSERT OR REPLACE INTO deletions (owner_tag, counter, body, tag) VALUES (?, ?, ?, ?)",
                          (owner_tag, ledger.counter, ledger.body, ledger.tag))
        if self._space is not None:
            self._space.note_record(len(ledger.body))


def _roll_back(connection: sqlite3.Connection) -> None:
    """Roll back what is still open; a failing rollback never hides the error that asked for it."""
    if connection.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            connection.rollback()
