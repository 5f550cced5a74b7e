"""The reads of a SQLite snapshot and the writes of a SQLite write transaction, on one connection each."""

from __future__ import annotations

import hmac
import sqlite3
from collections.abc import Iterator

from vault.errors import IntegrityError
from vault.storage.base import ListedRow, RowSeqs, StoredRow
from vault.storage.sqlite import schema
from vault.storage.sqlite.connections import TRANSLATE
from vault.storage.sqlite.schema import CHUNK_SHIFT, blob, valid_seq


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
