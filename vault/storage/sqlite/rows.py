"""A SQLite read snapshot: a context manager on this thread's connection, and the reads made inside it (the write
transaction, ``writes.py``, is one too). Objects, not generators: every put and every read enters one."""

from __future__ import annotations

from collections.abc import Generator

from keys import SealedLedger
from vault.errors import IntegrityError
from vault.storage.base import ListedRow, RowAt, RowSeqs, StoredRow
from vault.storage.sql import values
from vault.storage.sql.values import blob, held_by_another, stored_row, stores_id, storing_ids, with_summaries
from vault.storage.sqlite import schema
from vault.storage.sqlite.connections import TRANSLATE, Connections
from vault.storage.sqlite.schema import CHUNK_SHIFT, MAX_SEQ, valid_seq

LOOKUP_BATCH = 500  # ids or seqs bound in one row lookup: under SQLite's lowest limit on parameters (999)
SELECT_ROWS = ("SELECT rows.seq, id, owner_tag, turn_tag, key_version, expires_at, size_bytes, wrapped_key, metadata "
               "FROM rows")  # the columns of schema.SELECT_ROW_BY_SEQ, which values.stored_row reads


class SqliteReads:
    """A read snapshot: a deferred read transaction, or the thread's open write transaction joined."""

    __slots__ = ("_connections", "_execute", "_ids_indexed", "_own", "connection")

    def __init__(self, connections: Connections, ids_indexed: bool) -> None:
        self._connections = connections
        self._ids_indexed = ids_indexed

    def __enter__(self) -> SqliteReads:
        self._begin("BEGIN DEFERRED", join=True)
        return self

    def _begin(self, statement: str, join: bool) -> None:
        """Take this thread's connection and begin (or, with ``join``, join its open transaction)."""
        connection = self._connections.acquire()
        self._own = not (join and connection.in_transaction)
        if self._own:
            try:
                with TRANSLATE:
                    connection.execute(statement)
            except BaseException:
                self._connections.release(connection)
                raise
        self.connection = connection
        self._execute = connection.execute

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: object) -> None:
        try:
            if self._own and self.connection.in_transaction:
                with TRANSLATE:
                    self.connection.execute("COMMIT")
        finally:
            self._connections.release(self.connection)

    def find_row(self, owner_tag: bytes, row_id: bytes, seq: int) -> StoredRow | None:
        """The row with this id, if this owner holds it. A file made before schema 3 finds it by its index on ids."""
        with TRANSLATE:
            if self._ids_indexed:
                found = self._execute(schema.SELECT_ROW_BY_ID, (row_id,)).fetchone()
            elif valid_seq(seq):
                found = self._execute(schema.SELECT_ROW_BY_SEQ, (seq,)).fetchone()
            else:
                return None
        # the id first: a stale id meeting another row, damaged or not, is a miss like any other
        if found is None or not stores_id(found, row_id, owner_tag):
            return None
        return stored_row(found, MAX_SEQ)

    def held_by_another(self, owner_tag: bytes, row_id: bytes, seq: int) -> bool:
        """Whether another owner holds the row this id names (the audit trail's "denied")."""
        with TRANSLATE:
            if self._ids_indexed:
                found = self._execute("SELECT id, owner_tag FROM rows WHERE id = ?", (row_id,)).fetchone()
            elif valid_seq(seq):
                found = self._execute("SELECT id, owner_tag FROM rows WHERE seq = ?", (seq,)).fetchone()
            else:
                return False
        return held_by_another(found, row_id, owner_tag)

    def find_rows(self, owner_tag: bytes, wanted: list[tuple[bytes, int]]) -> list[StoredRow]:
        """``find_row`` of each (id, seq), LOOKUP_BATCH of them bound to one statement; the rows found, in order."""
        asked: list[tuple[bytes, bytes | int]]  # (the id asked, what the statement looks it up by)
        if self._ids_indexed:  # a file made before schema 3: by its index on ids, as find_row
            column, key_at, asked = "id", 1, [(row_id, row_id) for row_id, _seq in wanted]
        else:
            column, key_at, asked = "seq", 0, [(row_id, seq) for row_id, seq in wanted if valid_seq(seq)]
        keys = [key for _row_id, key in asked]
        by_key: dict[object, tuple] = {}
        with TRANSLATE:
            for first in range(0, len(keys), LOOKUP_BATCH):
                batch = keys[first:first + LOOKUP_BATCH]
                found_rows = self._execute(f"{SELECT_ROWS} WHERE {column} IN ({', '.join('?' * len(batch))})", batch)
                by_key.update((found[key_at], found) for found in found_rows)
        return [stored_row(found, MAX_SEQ) for found in storing_ids(asked, by_key, owner_tag)]

    def list_turn(self, owner_tag: bytes, turn_tag: bytes, now: float) -> list[tuple[StoredRow, bytes | None]]:
        """Unexpired rows of one owner's turn, each with its sealed summary (None if missing)."""
        with TRANSLATE:
            return with_summaries(self._execute(schema.SELECT_TURN, (owner_tag, turn_tag, now)).fetchall(), MAX_SEQ)

    def list_turn_summaries(self, owner_tag: bytes, turn_tag: bytes, now: float,
                            row_seqs: RowSeqs) -> list[ListedRow]:
        """A listing's columns, oldest first, each row's id checked against its seq (unless ids are indexed)."""
        with TRANSLATE:
            found = self._execute(schema.SELECT_TURN_SUMMARIES, (owner_tag, turn_tag, now)).fetchall()
        for _seq, row_id, key_version, expires_at, size_bytes, sealed in found:
            values.check_columns(key_version, expires_at, size_bytes)
            if type(row_id) is not bytes:
                raise IntegrityError("a stored row has columns of the wrong type")
            if type(sealed) is not bytes or not sealed:
                raise IntegrityError("a row's summary is missing")
        if not self._ids_indexed and row_seqs([row[1] for row in found]) != [row[0] for row in found]:
            raise IntegrityError("a listed row is not where its id says")  # moved or copied: no id reaches it
        return [ListedRow._make(row) for row in found]

    def wrapped_key(self, owner_tag: bytes, seq: int) -> bytes:
        """The wrapped data key of the owner's row ``seq`` (listed in this snapshot: its owner was checked)."""
        with TRANSLATE:
            found = self._execute("SELECT wrapped_key FROM rows WHERE seq = ? AND owner_tag = ?",
                                  (seq, owner_tag)).fetchone()
        if found is None:
            raise IntegrityError("a listed row disappeared inside one snapshot")
        return blob(found[0])

    def read_summary(self, row: RowAt) -> bytes | None:
        """The sealed summary of a row: in the row, else (written before schema 6) in ``summaries``."""
        with TRANSLATE:
            found = self._execute(schema.SELECT_SUMMARY, (row.seq,)).fetchone()
        return None if found is None or found[0] is None else blob(found[0])

    def read_chunks(self, row: RowAt, first: int, last: int) -> Generator[tuple[int, bytes], None, None]:
        """Sealed chunks ``first..last`` of a row, one at a time as the cursor steps: chunk 0 from the row
        when it holds it (a row of one chunk), then those in ``chunks`` (the reader refuses a chunk found in both)."""
        seq = row.seq
        base = seq << CHUNK_SHIFT
        if first == 0:
            with TRANSLATE:
                inline = self._execute(schema.SELECT_INLINE_CHUNK, (seq,)).fetchone()
            if inline is not None and inline[0] is not None:
                yield 0, blob(inline[0])
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

    def ledger(self, owner_tag: bytes) -> SealedLedger | None:
        """The owner's deletion ledger as stored, or None."""
        with TRANSLATE:
            found = self._execute("SELECT counter, body, tag FROM deletions WHERE owner_tag = ?",
                                  (owner_tag,)).fetchone()
        return None if found is None else values.sealed_ledger(*found)

    def ledger_head(self, owner_tag: bytes) -> tuple[int, bytes] | None:
        """The counter and tag of the owner's deletion ledger (its body not read), or None."""
        with TRANSLATE:
            found = self._execute("SELECT counter, tag FROM deletions WHERE owner_tag = ?", (owner_tag,)).fetchone()
        return None if found is None else (found[0], found[1])

    def ledgers(self) -> list[tuple[bytes, SealedLedger]]:
        """Every owner's deletion ledger."""
        with TRANSLATE:
            found = self._execute("SELECT owner_tag, counter, body, tag FROM deletions").fetchall()
        return [(values.blob(owner_tag), values.sealed_ledger(*rest)) for owner_tag, *rest in found]

    def expiring(self, after: float, until: float) -> list[StoredRow]:
        """Rows live at ``after`` that expire by ``until``."""
        with TRANSLATE:
            return [stored_row(row, MAX_SEQ) for row in self._execute(schema.SELECT_EXPIRING, (after, until))]
