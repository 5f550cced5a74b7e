"""The PostgreSQL write transaction: READ COMMITTED, per-owner advisory locks, and writes nobody reads the result of
(a put's inserts, the updates of an extend_turn or a rewrap batch) queued and sent in one pipeline with the
transaction's next statement or its COMMIT (rows.py says why)."""

from __future__ import annotations

import contextlib
from typing import Any

import psycopg

from keys import EPOCH_WRAPPED_SIZE, SealedLedger
from vault.errors import IntegrityError, StorageError
from vault.storage.base import RowAt, StoredRow
from vault.storage.postgres import sql
from vault.storage.postgres.connections import TRANSLATE, fetched, present
from vault.storage.postgres.rows import FLUSH_BYTES, PgReads, TransactionHost
from vault.storage.postgres.schema import KEYS_LOCK, LOCK_CLASS, OWNER_LOCK_CLASS, check_foreign_objects
from vault.storage.sql.session import ROW_TABLES
from vault.storage.sql.values import BIGINT_SEQS, blob, check_columns, with_summaries


def owner_lock_key(owner_tag: bytes) -> tuple[int, int]:
    """The advisory lock of one owner: two owners sharing it (one in 2^32) only queue behind each other."""
    return OWNER_LOCK_CLASS, int.from_bytes(owner_tag[:4].ljust(4, b"\0"), "big", signed=True)


class PgWriteTx(PgReads):
    """A write transaction; commits when the block ends, rolls back when it raises (a failed COMMIT too)."""

    BEGIN = "BEGIN ISOLATION LEVEL READ COMMITTED"
    READS_AHEAD = False  # each statement sees the latest commits: nothing is read ahead

    def __init__(self, store: TransactionHost) -> None:
        super().__init__(store)
        self._rows: list[dict[str, Any]] = []  # queued rows, each with its summary
        self._updates: list[tuple[str, dict[str, Any]]] = []  # queued updates (nothing reads their results)
        self._chunks: list[tuple[bytes, int, int, bytes]] = []  # (owner tag, seq, index, sealed)
        self._chunk_bytes = 0
        self._locked: set[tuple[int, int]] = set()
        self.deleted = False
        # the tables it deleted from, a ledger, destroyed keys: their catalog is checked before COMMIT
        self.tables_checked_at_commit: set[str] = set()

    def __enter__(self) -> PgWriteTx:
        if self._store.open_transaction() is not None:
            raise StorageError("a write transaction is already open in this thread")
        self._connection = self._store.pool.get()
        self._store.set_transaction(self)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: object) -> None:
        self._store.set_transaction(None)
        connection = self.connection  # set by __enter__
        try:
            if error is None:
                self._commit()
            elif self._begun:
                with contextlib.suppress(psycopg.Error):
                    connection.execute("ROLLBACK")
        finally:
            self._connection = None
            self._store.pool.put(connection)
        if error is not None:
            TRANSLATE.__exit__(kind, error, trace)  # a psycopg error leaves as its VaultError

    def _commit(self) -> None:
        """Send what is queued and COMMIT in one pipeline; on any failure roll back (a failed COMMIT rolls back)."""
        if not self._begun and not self._rows and not self._chunks and not self._updates:
            return
        connection = self.connection
        try:
            if self.tables_checked_at_commit:  # a trigger or rule on them, or a table in their place, could undo it
                self._before_statement()
                self._check_tables(connection)
            with TRANSLATE, connection.pipeline():
                if not self._begun:
                    connection.execute(self.BEGIN)
                    self._begun = True
                self._send_queued()
                connection.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(psycopg.Error):
                connection.execute("ROLLBACK")
            raise

    def _check_tables(self, connection: psycopg.Connection) -> None:
        """IntegrityError (the connection closed: its own session may be what was altered, a temporary table
        planted in it) when the tables this transaction must change for good carry or are shadowed by objects the
        vault did not make (only those: a shred's keys still go when a trigger sits on rows, and its row delete
        then fails)."""
        try:
            with TRANSLATE:
                check_foreign_objects(connection, self._store.schema, sorted(self.tables_checked_at_commit))
        except IntegrityError:
            self.distrust()
            raise

    def distrust(self) -> None:
        """Close this transaction's connection: its own session may be what was altered (a temporary relation or
        rule of its own), so it is never used again; the transaction then rolls back."""
        with contextlib.suppress(psycopg.Error):
            self.connection.close()

    def _send_queued(self) -> None:
        """Send the queued updates, chunks and rows (inside the caller's pipeline): a row of one chunk, held with
        its summary in its tuple, in one statement."""
        connection = self.connection
        chunks, rows, updates = self._chunks, self._rows, self._updates
        self._chunks, self._chunk_bytes, self._rows, self._updates = [], 0, [], []
        for statement, parameters in updates:
            connection.execute(statement, parameters)
        if len(chunks) == 1 and len(rows) == 1 and chunks[0][:3] == (rows[0]["owner_tag"], rows[0]["seq"], 0):
            connection.execute(sql.INSERT_ROW, rows[0] | {"chunk": chunks[0][3]})
            return
        if len(chunks) == 1:
            connection.execute(sql.INSERT_CHUNK, chunks[0])
        elif chunks:
            with connection.cursor() as cursor:
                cursor.executemany(sql.INSERT_CHUNK, chunks)
        for row in rows:
            connection.execute(sql.INSERT_ROW, row | {"chunk": None})

    def _before_statement(self) -> None:
        """Queued writes go before any other statement of the transaction (its order is the caller's)."""
        if not self._rows and not self._chunks and not self._updates:
            return
        connection = self.connection
        with TRANSLATE, connection.pipeline():
            if not self._begun:
                connection.execute(self.BEGIN)
                self._begun = True
            self._send_queued()

    def lock_keys(self, owner_tag: bytes | None = None) -> None:
        """Take the key lock, then the owner's (None: the key lock alone, what an epoch's attempts take): what every
        change to an owner's key versions holds (a reservation, a first key, a rotation, a shred, a retirement),
        always in this order, so they never deadlock and never interleave (a shred waits for a rotation's keyring
        write, as it waits for SQLite's one writer lock)."""
        key = (LOCK_CLASS, KEYS_LOCK)
        if key not in self._locked:
            self._run(sql.OWNER_LOCK, key)
            self._locked.add(key)
        if owner_tag is not None:
            self.lock_owner(owner_tag)

    def lock_owner(self, owner_tag: bytes) -> None:
        """Take the owner's advisory lock (once per transaction), queueing behind the owner's other writers."""
        key = owner_lock_key(owner_tag)
        if key not in self._locked:
            self._run(sql.OWNER_LOCK, key)
            self._locked.add(key)

    def next_seq_and_commitments(self, owner_tag: bytes, key_version: int,
                                 epoch: tuple[int, int] = (0, 0)) -> tuple[int, bytes | None, bytes | None]:
        """The next seq (a sequence: never reused) and the recorded commitments of the key version and the epoch
        key, their rows held FOR SHARE (closing an epoch waits for this put); the owner's lock first. Lock, seq and
        commitments go in one round trip with the BEGIN. On one server, a seq another owner's row holds (the
        sequence set back) is an IntegrityError here; the primary key refuses the owner's own at the insert."""
        key = owner_lock_key(owner_tag)
        statements = [] if key in self._locked else [(sql.OWNER_LOCK, key)]
        parameters = {"tag": owner_tag, "v": key_version, "len": epoch[0], "e": epoch[1]}
        checks = [] if self._store.sharded else [(sql.SEQ_TAKEN, None)]
        cursors = self._sent_together([*statements, (sql.NEXT_SEQ, None), *checks, (sql.COMMITMENTS, parameters)])
        self._locked.add(key)
        seq, *taken, commitments = cursors[len(statements):]
        if taken and present(fetched(taken[0].fetchone))[0]:
            raise IntegrityError("the row sequence returned a seq another owner's row holds (it was set back); "
                                 "restore the database from backup")
        seq = present(fetched(seq.fetchone))[0]
        commitment, epoch_check = present(fetched(commitments.fetchone))
        if type(seq) is not int or seq < 1:
            raise IntegrityError("the row sequence returned a value that is not a seq")
        return seq, None if commitment is None else blob(commitment), None if epoch_check is None else blob(epoch_check)

    def insert_chunk(self, row: RowAt, index: int, sealed: bytes) -> None:
        """Queue one sealed chunk; the queue is sent once it holds FLUSH_BYTES, the rest with the COMMIT."""
        self._chunks.append((row.owner_tag, row.seq, index, sealed))
        self._chunk_bytes += len(sealed)
        if self._chunk_bytes >= FLUSH_BYTES:
            self._before_statement()

    def insert_row(self, row: StoredRow, sealed_summary: bytes) -> None:
        """Queue a row's summary and envelope; they go with the COMMIT."""
        self._rows.append({"seq": row.seq, "id": row.row_id, "owner_tag": row.owner_tag, "turn_tag": row.turn_tag,
                           "key_version": row.key_version, "expires_at": row.expires_at, "size_bytes": row.size_bytes,
                           "wrapped_key": row.wrapped_key, "metadata": row.metadata, "summary": sealed_summary})

    def owner_usage(self, owner_tag: bytes) -> tuple[int, int]:
        """(rows, bytes) of an owner, its ledger's bytes included, under the owner's lock."""
        self.lock_owner(owner_tag)
        rows, size = present(self._one(sql.OWNER_USAGE, {"tag": owner_tag}))
        if type(rows) is not int or type(size) is not int:
            raise IntegrityError("a stored row has columns of the wrong type")
        return rows, size

    def update_expiry(self, row: RowAt, expires_at: float, wrapped_key: bytes, metadata: bytes,
                      sealed_summary: bytes) -> None:
        """Give a row a new expiry with its data key wrapped for its new epoch and its re-sealed records
        (queued, as inserts are: an extend_turn sends its updates together, not one round trip each)."""
        self._queue_update((sql.UPDATE_EXPIRY, {"tag": row.owner_tag, "seq": row.seq, "expires_at": expires_at,
                                              "wrapped_key": wrapped_key, "metadata": metadata,
                                              "summary": sealed_summary}))

    def update_wrapped_key(self, row: RowAt, version: int, wrapped_key: bytes, sealed_summary: bytes | None) -> None:
        """Store a row's data key wrapped under ``version``, and its re-sealed summary (None: unchanged); queued."""
        parameters = {"tag": row.owner_tag, "seq": row.seq, "version": version, "wrapped_key": wrapped_key,
                      "summary": sealed_summary}
        statement = sql.UPDATE_WRAPPED_KEY if sealed_summary is None else sql.UPDATE_WRAPPED_KEY_AND_SUMMARY
        self._queue_update((statement, parameters))

    def _queue_update(self, update: tuple[str, dict[str, Any]]) -> None:
        """Queue an update after whatever inserts are queued (they are sent first: the order is the caller's)."""
        if self._rows or self._chunks:
            self._before_statement()
        self._updates.append(update)

    def rows_to_rewrap(self, owner_tag: bytes, primary: int, limit: int) -> list[tuple[StoredRow, bytes | None]]:
        """Up to ``limit`` rows of an owner wrapped under another version than ``primary``, or under no epoch."""
        self.lock_owner(owner_tag)
        return with_summaries(self._all(sql.SELECT_OLD_VERSION,
                                        (owner_tag, owner_tag, primary, EPOCH_WRAPPED_SIZE, limit)), BIGINT_SEQS)

    def put_meta(self, name: str, value: bytes) -> None:
        """Set a meta value."""
        self._run("INSERT INTO meta (name, value) VALUES (%s, %s)", (name, value))

    def ledger(self, owner_tag: bytes) -> SealedLedger | None:
        """The owner's ledger, read under the owner's lock: a delete reads, extends and writes it back."""
        self.lock_owner(owner_tag)
        return super().ledger(owner_tag)

    def delete_row(self, row: StoredRow) -> float | None:
        """Delete one row, its summary and chunks; the expiry it had, or None if the row at its seq no longer
        stores its id (deleted meanwhile). One statement: a concurrent delete of the row waits for this one and
        then finds it gone. The tables are checked before COMMIT whether or not a row went: a trigger planted
        since open that skips the delete would otherwise pass for "deleted meanwhile". Every part of the row the
        statement saw must go with it (the row's lock keeps any other delete of them out): one kept, by whatever
        object on whichever node, is an IntegrityError, and the transaction rolls back."""
        self.tables_checked_at_commit |= ROW_TABLES
        found = self._one(sql.DELETE_ROW, {"tag": row.owner_tag, "seq": row.seq, "id": row.row_id})
        if found is None:
            return None
        if found[1] != found[2]:
            raise IntegrityError("a delete left parts of the row it was asked to remove (the database was altered "
                                 "to keep them)")
        check_columns(1, found[0], 0)  # a wrong type raises, and the transaction, rolled back, deleted nothing
        self.deleted = True
        return found[0]

    def put_ledger(self, owner_tag: bytes, ledger: SealedLedger) -> None:
        """Store (or replace) the owner's deletion ledger."""
        self.lock_owner(owner_tag)
        self._run(sql.UPSERT_LEDGER, (owner_tag, ledger.counter, ledger.body, ledger.tag))
        self.tables_checked_at_commit.add("deletions")


def delete_batch(tx: PgWriteTx, statement: str, picked_by: dict[str, object], after: int,
                 size: int) -> tuple[int, int]:
    """Lock and delete up to ``size`` rows past seq ``after`` that ``statement`` picks by ``picked_by`` (its
    parameters), with their summaries and chunks, in one statement; returns how many and the last seq. Every row
    locked must go (a rule or trigger planted since the store was opened could keep one:
    schema.check_foreign_objects refuses those)."""
    tx.tables_checked_at_commit |= ROW_TABLES  # a trigger or rule planted since open: refused at COMMIT
    locked, gone, last = present(tx._one(statement, picked_by | {"after": after, "size": size}))
    if gone != locked:
        raise IntegrityError("a delete left rows it was asked to remove (the database was altered to keep them)")
    tx.deleted = tx.deleted or gone > 0
    return gone, after if last is None else last
