"""A PostgreSQL read snapshot and write transaction, and the reads and writes made inside them.

A snapshot is ``REPEATABLE READ READ ONLY``: one view for the whole call, so a row deleted meanwhile is wholly
there or wholly gone. A write transaction is READ COMMITTED: writers of different owners never wait for each
other; those of one owner queue on the owner's advisory lock, taken by the statements that must see the owner's
rows as they are (a put's seq and key check, the owner's usage, ledger and key versions). A put's key check takes
the key's row ``FOR SHARE``, which a shred or retirement deletes: the two conflict, as they must.

Round trips: BEGIN goes with the first statement, and chunks, summary, row and COMMIT go together at the end, in
one pipeline, so a put costs two round trips. A snapshot's row lookup also brings what a read asks next in the same
snapshot, the head of the owner's deletion ledger and, for a row of one chunk, that chunk (held in the row's own
tuple with its summary): a slice of such a row costs two round trips (BEGIN with the row, COMMIT), of a larger row
three (the chunks between).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Generator
from typing import Any, Protocol

import psycopg

from keys import CHUNK_BYTES, SealedLedger
from vault.errors import IntegrityError, StorageError
from vault.storage.base import ListedRow, RowAt, RowSeqs, StoredRow
from vault.storage.postgres import sql
from vault.storage.postgres.connections import TRANSLATE, Pool, fetched
from vault.storage.sql.values import (
    BIGINT_SEQS,
    blob,
    check_columns,
    held_by_another,
    sealed_ledger,
    stored_row,
    stores_id,
    storing_ids,
    with_summaries,
)

STREAM_AFTER = 16  # a read of more chunks than this streams through a server-side cursor, this many at a time
FLUSH_BYTES = 4 << 20  # queued chunk inserts are sent once they hold this much (a long put never holds it all)
_cursor_names = itertools.count(1)


class TransactionHost(Protocol):
    """What a snapshot or write transaction uses of its store (PostgresStore): the connection pool, the schema of
    the vault's tables, and the transaction and snapshot this thread has open."""

    pool: Pool
    schema: str | None
    sharded: bool  # on a Citus coordinator (vault/storage/postgres/citus.py)

    def open_transaction(self) -> PgReads | None: ...

    def set_transaction(self, tx: PgReads | None) -> None: ...

    def set_snapshot(self, reads: PgReads | None) -> None: ...


class PgReads:
    """A read snapshot, or the thread's open write transaction joined."""

    BEGIN = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
    READS_AHEAD = True  # one snapshot: what a row lookup brought is what a later statement would read

    def __init__(self, store: TransactionHost) -> None:
        self._store = store
        self._connection: psycopg.Connection | None = None
        self._begun = False
        self._own = True
        self._heads: dict[bytes, tuple[int, bytes] | None] = {}  # ledger heads read with a row, by owner tag
        # the one chunk of small rows read with the row, by seq: as (0, sealed) from the row and from the chunks
        # table, whichever hold it (both: the reader meets chunk 0 twice and refuses it)
        self._first_chunks: dict[tuple[bytes, int], list[tuple[int, bytes]]] = {}  # by (owner tag, seq)

    def __enter__(self) -> PgReads:
        joined = self._store.open_transaction()
        if joined is not None:
            self._connection, self._begun, self._own = joined.connection, True, False
        else:
            self._connection = self._store.pool.get()
            self._store.set_snapshot(self)  # the thread's queries meanwhile (its keys) join it: one connection
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: object) -> None:
        if not self._own:
            return
        self._store.set_snapshot(None)
        connection = self.connection  # set by __enter__
        self._connection = None
        try:
            if self._begun and error is None:
                with TRANSLATE:
                    connection.execute("COMMIT")
            elif self._begun:  # a failing rollback never hides the error that asked for it
                with contextlib.suppress(psycopg.Error):
                    connection.execute("ROLLBACK")
        finally:
            self._store.pool.put(connection)

    @property
    def connection(self) -> psycopg.Connection:
        if self._connection is None:
            raise StorageError("the transaction is over")
        return self._connection

    def _run(self, statement: str, parameters: Any = None) -> psycopg.Cursor:
        """One statement, its results in binary (see ``_pipelined``)."""
        return self._pipelined([(statement, parameters)])

    def _pipelined(self, statements: list[tuple[str, Any]]) -> psycopg.Cursor:
        """Statements sent together (one round trip), the last one's cursor returned (``_sent_together``)."""
        return self._sent_together(statements)[-1]

    def _sent_together(self, statements: list[tuple[str, Any]]) -> list[psycopg.Cursor]:
        """Statements sent together (one round trip), each one's cursor returned, results in binary. The
        transaction's BEGIN goes with the first; if the server dropped the connection (a restart) before this
        transaction did anything, they are tried once more on a new one."""
        self._before_statement()
        with TRANSLATE:
            try:
                return self._send(statements)
            except psycopg.OperationalError:
                if not self._own or self._begun:
                    raise
                self._store.pool.put(self.connection)  # the pool discards it: it is broken
                self._store.pool.check()
                self._connection = self._store.pool.get()
                return self._send(statements)

    def _send(self, statements: list[tuple[str, Any]]) -> list[psycopg.Cursor]:
        connection = self.connection
        if self._begun and len(statements) == 1:
            return [connection.execute(statements[0][0], statements[0][1], binary=True)]
        with connection.pipeline():
            if not self._begun:
                connection.execute(self.BEGIN)
            cursors = [connection.execute(statement, parameters, binary=True) for statement, parameters in statements]
        self._begun = True
        return cursors

    def _before_statement(self) -> None:
        """What must go before any other statement (a write transaction's queued inserts)."""

    def _one(self, statement: str, parameters: Any = None) -> tuple | None:
        return fetched(self._run(statement, parameters).fetchone)

    def _all(self, statement: str, parameters: Any = None) -> list[tuple]:
        return fetched(self._run(statement, parameters).fetchall)

    def find_row(self, owner_tag: bytes, row_id: bytes, seq: int) -> StoredRow | None:
        """The owner's row at the seq its id names, if it stores this very id (compared in constant time first)."""
        if type(seq) is not int or not 1 <= seq < 1 << 63:
            return None
        ahead = self.READS_AHEAD and self._own  # not in a joined write transaction (READ COMMITTED)
        found = (self._one(sql.SELECT_ROW_AHEAD, (CHUNK_BYTES, owner_tag, seq)) if ahead
                 else self._one(sql.SELECT_ROW, (owner_tag, seq)))
        if found is None or not stores_id(found, row_id, owner_tag):
            return None
        row = stored_row(found[:9], BIGINT_SEQS)
        if ahead:
            has_ledger, counter, tag, *chunks = found[9:]
            self._heads[row.owner_tag] = (counter, blob(tag)) if has_ledger else None
            if row.size_bytes <= CHUNK_BYTES and any(chunk is not None for chunk in chunks):  # as the join's
                self._first_chunks[owner_tag, seq] = [(0, blob(chunk)) for chunk in chunks if chunk is not None]
        return row

    def held_by_another(self, owner_tag: bytes, row_id: bytes, seq: int) -> bool:
        """Whether another owner holds the row this id names (the audit trail's "denied"), by the index on seq."""
        if type(seq) is not int or not 1 <= seq < 1 << 63:
            return False
        return held_by_another(self._one("SELECT id, owner_tag FROM rows WHERE seq = %s LIMIT 1", (seq,)), row_id,
                               owner_tag)

    def find_rows(self, owner_tag: bytes, wanted: list[tuple[bytes, int]]) -> list[StoredRow]:
        """``find_row`` of each (id, seq) of one owner, all in one statement; the rows found, in order."""
        valid = [(row_id, seq) for row_id, seq in wanted if type(seq) is int and 1 <= seq < 1 << 63]
        if not valid:
            return []
        seqs = [seq for _row_id, seq in valid]
        by_seq = {found[0]: found for found in self._all(sql.SELECT_ROWS, (owner_tag, seqs))}
        return [stored_row(found, BIGINT_SEQS) for found in storing_ids(valid, by_seq, owner_tag)]

    def list_turn(self, owner_tag: bytes, turn_tag: bytes, now: float) -> list[tuple[StoredRow, bytes | None]]:
        """Unexpired rows of one owner's turn, each with its sealed summary (None if missing)."""
        return with_summaries(self._all(sql.SELECT_TURN, (owner_tag, owner_tag, turn_tag, now)), BIGINT_SEQS)

    def list_turn_summaries(self, owner_tag: bytes, turn_tag: bytes, now: float,
                            row_seqs: RowSeqs) -> list[ListedRow]:
        """A listing's columns, oldest first, every row's id checked against its seq."""
        found = self._all(sql.SELECT_TURN_SUMMARIES, (owner_tag, owner_tag, turn_tag, now))
        for _seq, row_id, key_version, expires_at, size_bytes, sealed in found:
            check_columns(key_version, expires_at, size_bytes)
            if type(row_id) is not bytes:
                raise IntegrityError("a stored row has columns of the wrong type")
            if type(sealed) is not bytes or not sealed:
                raise IntegrityError("a row's summary is missing")
        if row_seqs([row[1] for row in found]) != [row[0] for row in found]:
            raise IntegrityError("a listed row is not where its id says")  # moved or copied: no id reaches it
        return [ListedRow._make(row) for row in found]

    def wrapped_key(self, owner_tag: bytes, seq: int) -> bytes:
        """The wrapped data key of the owner's row ``seq``."""
        found = self._one("SELECT wrapped_key FROM rows WHERE owner_tag = %s AND seq = %s", (owner_tag, seq))
        if found is None:
            raise IntegrityError("a listed row disappeared inside one snapshot")
        return blob(found[0])

    def read_summary(self, row: RowAt) -> bytes | None:
        """The sealed summary of a row: in the row, else (written before schema 3) in ``summaries``."""
        found = self._one(sql.SELECT_SUMMARY, {"tag": row.owner_tag, "seq": row.seq})
        return None if found is None or found[0] is None else blob(found[0])

    def read_chunks(self, row: RowAt, first: int, last: int) -> Generator[tuple[int, bytes], None, None]:
        """Sealed chunks ``first..last`` of a row in order: a few in one statement, more through a
        server-side cursor fetching STREAM_AFTER at a time (a full read never holds the row twice). The one chunk
        of a small row comes from its lookup, if this snapshot made it."""
        at = (row.owner_tag, row.seq)
        if first == last == 0 and at in self._first_chunks:
            yield from self._first_chunks.pop(at)
            return
        bounds = {"tag": row.owner_tag, "seq": row.seq, "first": first, "last": last}
        if last - first < STREAM_AFTER:
            for index, sealed in self._all(sql.SELECT_CHUNKS, bounds):
                yield index, blob(sealed)
            return
        self._run("SELECT 1")  # the transaction begun: a named cursor lives inside it
        with TRANSLATE:
            cursor = self.connection.cursor(f"scratchvault_read_{next(_cursor_names)}", binary=True)
        try:
            with TRANSLATE:
                cursor.execute(sql.SELECT_CHUNKS, bounds)
            while batch := fetched(lambda: cursor.fetchmany(STREAM_AFTER)):
                for index, sealed in batch:
                    yield index, blob(sealed)
        finally:
            with TRANSLATE:
                if not self.connection.closed:
                    cursor.close()

    def turn_has_rows(self, owner_tag: bytes, turn_tag: bytes, now: float) -> bool:
        """Whether one owner's turn has an unexpired row."""
        return self._one(sql.TURN_HAS_ROWS, (owner_tag, turn_tag, now)) is not None

    def owner_has_rows(self, owner_tag: bytes) -> bool:
        """Whether any row (expired or not) belongs to this owner tag."""
        return self._one("SELECT 1 FROM rows WHERE owner_tag = %s LIMIT 1", (owner_tag,)) is not None

    def ledger(self, owner_tag: bytes) -> SealedLedger | None:
        """The owner's deletion ledger as stored, or None."""
        found = self._one("SELECT counter, body, tag FROM deletions WHERE owner_tag = %s", (owner_tag,))
        return None if found is None else sealed_ledger(*found)

    def ledger_head(self, owner_tag: bytes) -> tuple[int, bytes] | None:
        """The counter and tag of the owner's deletion ledger (its body not read), or None; as the lookup of one of
        the owner's rows read it, if this snapshot made one."""
        if owner_tag in self._heads:
            return self._heads[owner_tag]
        found = self._one("SELECT counter, tag FROM deletions WHERE owner_tag = %s", (owner_tag,))
        return None if found is None else (found[0], blob(found[1]))

    def ledgers(self) -> list[tuple[bytes, SealedLedger]]:
        """Every owner's deletion ledger."""
        found = self._all("SELECT owner_tag, counter, body, tag FROM deletions")
        return [(blob(owner_tag), sealed_ledger(*rest)) for owner_tag, *rest in found]

    def expiring(self, after: float, until: float) -> list[StoredRow]:
        """Rows live at ``after`` that expire by ``until``."""
        return [stored_row(row, BIGINT_SEQS) for row in self._all(sql.SELECT_EXPIRING, (after, until))]
