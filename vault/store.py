"""All SQL of scratchvault, behind a narrow interface (a PostgreSQL store can implement the same methods).

Clear columns are only what must be indexed or swept without keys: row id, owner tag, turn tag, key
version, expiry, size. A row is found from its id without an index on ids: the id encrypts the row's seq
(keys/blind_index.py). Content chunks live in ``chunks`` under the integer key ``seq << 20 | index``, so a
slice is a rowid range read and a delete is a rowid range delete; summaries live apart in ``summaries``.
SQLite runs in WAL mode with ``synchronous=FULL`` (a returned put survives power loss) and
``secure_delete=ON`` (deleted rows, summaries and the pages rebalancing frees are zeroed; chunks are deleted
under FAST, their key being gone); see threat_model.md, "Deletion".
"""

from __future__ import annotations

import hmac
import os
import sqlite3
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from keys.envelope import MAX_CHUNKS
from keys.errors import IntegrityError, StorageError
from vault import paths

# 2: row format 2 (binary metadata; summaries under turn keys). Raised on open, so a scratchvault that knows only
# version 1 (which would rewrap format 2 summaries without re-sealing them) refuses the file from then on.
# 3: row ids encrypt the row's seq (keys/blind_index.py); a file made at version 3 has no index on ids, so an
# older scratchvault, whose random ids this one could not find, must refuse it. A file made before keeps its index.
SCHEMA_VERSION = 3
MAX_SEQ = 1 << (63 - 20)  # chunk keys seq << 20 | index must fit SQLite's signed 64-bit integers
MAX_KEY_VERSION = 2**31 - 1
CHUNK_SHIFT = MAX_CHUNKS.bit_length() - 1  # 20: chunk key = seq << 20 | index
GC_BATCH = 2000
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS rows (
    seq INTEGER PRIMARY KEY,
    id BLOB NOT NULL,
    owner_tag BLOB NOT NULL,
    turn_tag BLOB NOT NULL,
    key_version INTEGER NOT NULL,
    expires_at REAL NOT NULL,
    size_bytes INTEGER NOT NULL,
    wrapped_key BLOB NOT NULL,
    metadata BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS rows_owner_turn ON rows (owner_tag, turn_tag);
CREATE INDEX IF NOT EXISTS rows_expiry ON rows (expires_at);
CREATE TABLE IF NOT EXISTS summaries (seq INTEGER PRIMARY KEY, sealed BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS chunks (pos INTEGER PRIMARY KEY, sealed BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS owner_keys (
    owner_tag BLOB NOT NULL,
    version INTEGER NOT NULL,
    check_value BLOB NOT NULL,
    PRIMARY KEY (owner_tag, version)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS owners (owner_tag BLOB PRIMARY KEY, sealed_name BLOB NOT NULL) WITHOUT ROWID;
"""
_INSERT_ROW = (
    "INSERT INTO rows (seq, id, owner_tag, turn_tag, key_version, expires_at, size_bytes, wrapped_key, metadata) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_SELECT_ROW_BY_SEQ = (
    "SELECT seq, id, owner_tag, turn_tag, key_version, expires_at, size_bytes, wrapped_key, metadata FROM rows "
    "WHERE seq = ?"
)
_SELECT_ROW_BY_ID = (  # files made before schema 3, which have an index on ids
    "SELECT seq, id, owner_tag, turn_tag, key_version, expires_at, size_bytes, wrapped_key, metadata FROM rows "
    "WHERE id = ?"
)
# a put's one read: the next seq and the recorded commitment of the owner key version that will wrap the row
_NEXT_ROW = ("SELECT (SELECT coalesce(max(seq), 0) + 1 FROM rows), "
             "(SELECT check_value FROM owner_keys WHERE owner_tag = ? AND version = ?)")
_COUNTS = "SELECT count(*), coalesce(sum(size_bytes), 0), coalesce(sum(expires_at <= ?), 0) FROM rows"
_EXPIRED_BATCH = "SELECT seq FROM rows WHERE expires_at <= ? LIMIT ?"
_OWNER_BATCH = "SELECT seq FROM rows WHERE owner_tag = ? LIMIT ?"
_SELECT_OLD_VERSION = (
    "SELECT rows.seq, id, owner_tag, turn_tag, key_version, expires_at, size_bytes, wrapped_key, metadata, "
    "summaries.sealed FROM rows LEFT JOIN summaries ON summaries.seq = rows.seq "
    "WHERE owner_tag = ? AND key_version != ? LIMIT ?"
)
_SELECT_TURN = (
    "SELECT rows.seq, id, owner_tag, turn_tag, key_version, expires_at, size_bytes, wrapped_key, metadata, "
    "summaries.sealed FROM rows LEFT JOIN summaries ON summaries.seq = rows.seq "
    "WHERE owner_tag = ? AND turn_tag = ? AND expires_at > ?"
)
# what a listing needs and no more (no metadata), in insertion order (the owner/turn index is ordered by seq)
_SELECT_TURN_SUMMARIES = (
    "SELECT rows.seq, id, key_version, expires_at, size_bytes, summaries.sealed FROM rows "
    "LEFT JOIN summaries ON summaries.seq = rows.seq WHERE owner_tag = ? AND turn_tag = ? AND expires_at > ? "
    "ORDER BY rows.seq"
)


@dataclass(slots=True)  # not frozen: made per row or chunk, and a frozen __init__ is slow
class RowHeader:
    """The clear columns and sealed envelope of a row, as stored (nothing decrypted)."""

    seq: int
    row_id: bytes
    owner_tag: bytes
    turn_tag: bytes
    key_version: int
    expires_at: float
    size_bytes: int
    wrapped_key: bytes
    metadata: bytes


class SqliteStore:
    """One SQLite file; a connection per thread (WAL lets readers run beside the single writer)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._identity = paths.identity(path)  # every later connection must reach this same file
        self._uri = "file:" + urllib.parse.quote(os.fsencode(path)) + "?mode=rw"  # bytes: any valid file name
        self._checkpoint_pending = False
        self._busy: dict[sqlite3.Connection, int] = {}
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False
        with self.transaction() as connection:
            for statement in filter(str.strip, _SCHEMA.split(";")):
                connection.execute(statement)
            found = connection.execute("PRAGMA user_version").fetchone()[0]
            if found > SCHEMA_VERSION:
                raise StorageError("the database was written by a newer scratchvault; upgrade to open it")
            if found < SCHEMA_VERSION:
                connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            self._ids_indexed = _has_id_index(connection)

    # -- connections and transactions ------------------------------------------------------------------
    def _connection(self) -> sqlite3.Connection:
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            return connection
        with self._lock:
            if self._closed:
                raise StorageError("the vault is closed")
            paths.check_identity(self._path, self._identity)
            with translate_errors():
                connection = sqlite3.connect(self._uri, uri=True, timeout=30.0, isolation_level=None,
                                             check_same_thread=False)
                for pragma in ("journal_mode = WAL", "synchronous = FULL", "secure_delete = ON",
                               "foreign_keys = OFF", "trusted_schema = OFF", "busy_timeout = 30000"):
                    connection.execute("PRAGMA " + pragma)
            self._connections.append(connection)
        self._local.connection = connection
        return connection

    def _acquire(self) -> sqlite3.Connection:
        """This thread's connection, marked busy: close() from another thread never closes a connection under a
        running statement (that crashes the sqlite3 module); a busy one closes itself when its last use ends."""
        connection = self._connection()
        with self._lock:
            if self._closed:
                raise StorageError("the vault is closed")
            self._busy[connection] = self._busy.get(connection, 0) + 1
        return connection

    def _release(self, connection: sqlite3.Connection) -> None:
        with self._lock:
            self._busy[connection] -= 1
            last = self._busy[connection] == 0
            if last:
                del self._busy[connection]
            orphaned = last and self._closed
        if orphaned:
            connection.close()

    @contextmanager
    def _using(self) -> Iterator[sqlite3.Connection]:
        """This thread's connection, busy while used (see _acquire)."""
        connection = self._acquire()
        try:
            yield connection
        finally:
            self._release(connection)

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (BEGIN IMMEDIATE: takes the write lock up front, so no upgrade deadlock). One
        generator, not one inside _using: every put enters it."""
        connection = self._acquire()
        try:
            with _TRANSLATE:
                connection.execute("BEGIN IMMEDIATE")
            try:
                with _TRANSLATE:
                    yield connection
            except BaseException:
                if connection.in_transaction:
                    connection.rollback()
                raise
            with _TRANSLATE:
                connection.execute("COMMIT")
        finally:
            self._release(connection)
        if self._checkpoint_pending:
            self.checkpoint()

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """A read transaction, so one read-side call sees one consistent state (not a row deleted and its seq
        reused between two of its statements); inside another transaction it just joins it."""
        with self._using() as connection:
            if connection.in_transaction:
                yield
                return
            with translate_errors():
                connection.execute("BEGIN DEFERRED")
            try:
                yield
            finally:
                if connection.in_transaction:
                    with translate_errors():
                        connection.execute("COMMIT")

    def _query(self, sql: str, parameters: tuple = ()) -> list[tuple]:
        with self._using() as connection, translate_errors():
            return connection.execute(sql, parameters).fetchall()

    def close(self) -> None:
        """Finish a pending checkpoint, close every thread's connection; later calls raise StorageError."""
        if self._checkpoint_pending and not self._closed:
            self.checkpoint()
        with self._lock:
            self._closed = True
            idle = [c for c in self._connections if c not in self._busy]  # busy ones close themselves
            self._connections = []
        for connection in idle:
            connection.close()

    # -- vault metadata --------------------------------------------------------------------------------
    def get_meta(self, name: str) -> bytes | None:
        """A value from the meta table."""
        found = self._query("SELECT value FROM meta WHERE name = ?", (name,))
        return _blob(found[0][0]) if found else None

    @staticmethod
    def put_meta(connection: sqlite3.Connection, name: str, value: bytes) -> None:
        """Set a meta value inside a transaction."""
        connection.execute("INSERT INTO meta (name, value) VALUES (?, ?)", (name, value))

    # -- rows ------------------------------------------------------------------------------------------
    @staticmethod
    def next_row(connection: sqlite3.Connection, owner_tag: bytes, key_version: int) -> tuple[int, bytes | None]:
        """The seq the next row will get and the recorded commitment of the owner key version that will wrap
        it (None if none): one statement, inside the write transaction that inserts the row."""
        seq, check = connection.execute(_NEXT_ROW, (owner_tag, key_version)).fetchone()
        if not _valid_seq(seq):  # only a writer of the file puts a row at the last seq (2^43 - 1) or past it
            raise IntegrityError("a stored row's seq is out of range; no row can follow it")
        return seq, None if check is None else _blob(check)

    @staticmethod
    def insert_chunk(connection: sqlite3.Connection, seq: int, index: int, sealed: bytes) -> None:
        """Store one sealed chunk of row ``seq``."""
        connection.execute("INSERT INTO chunks (pos, sealed) VALUES (?, ?)", ((seq << CHUNK_SHIFT) | index, sealed))

    @staticmethod
    def insert_row(connection: sqlite3.Connection, header: RowHeader, sealed_summary: bytes) -> None:
        """Store a row's envelope and summary (after its chunks, in the same transaction)."""
        connection.execute("INSERT INTO summaries (seq, sealed) VALUES (?, ?)", (header.seq, sealed_summary))
        connection.execute(
            _INSERT_ROW,
            (header.seq, header.row_id, header.owner_tag, header.turn_tag, header.key_version,
             header.expires_at, header.size_bytes, header.wrapped_key, header.metadata),
        )

    def find_row(self, row_id: bytes, seq: int) -> RowHeader | None:
        """The row with this id, whoever owns it (the caller checks ownership). ``seq`` is where the id says its
        row is; the row there is this id's only if it stores this very id (a seq is reused after a delete, and
        any 16 bytes name some seq). A file made before schema 3 finds rows by its index on ids instead."""
        if self._ids_indexed:
            found = self._query(_SELECT_ROW_BY_ID, (row_id,))
        elif _valid_seq(seq):
            found = self._query(_SELECT_ROW_BY_SEQ, (seq,))
        else:
            return None
        # the id first: a stale id meeting another row, damaged or not, is a miss like any other
        if not found or type(found[0][1]) is not bytes or not hmac.compare_digest(found[0][1], row_id):
            return None
        return _header(found[0])

    @property
    def ids_name_seqs(self) -> bool:
        """Whether rows are found from the seq their id names (a file made at schema 3 or later)."""
        return not self._ids_indexed

    def list_turn(self, owner_tag: bytes, turn_tag: bytes, now: float) -> list[tuple[RowHeader, bytes | None]]:
        """Unexpired rows of one owner's turn, each with its sealed summary (None if missing)."""
        return _with_summaries(self._query(_SELECT_TURN, (owner_tag, turn_tag, now)))

    def list_turn_summaries(self, owner_tag: bytes, turn_tag: bytes,
                            now: float) -> list[tuple[int, bytes, int, float, int, bytes]]:
        """(seq, row id, key version, expiry, size, sealed summary) of each unexpired row of one owner's turn,
        oldest first: a listing's columns only. A missing summary or a mistyped column is tampering."""
        found = self._query(_SELECT_TURN_SUMMARIES, (owner_tag, turn_tag, now))
        for _seq, row_id, key_version, expires_at, size_bytes, sealed in found:
            if not (type(row_id) is bytes and type(key_version) is int and 1 <= key_version <= MAX_KEY_VERSION
                    and type(expires_at) is float and type(size_bytes) is int and 0 <= size_bytes < 2**63):
                raise IntegrityError("a stored row has columns of the wrong type")
            if type(sealed) is not bytes or not sealed:
                raise IntegrityError("a row's summary is missing")
        return found

    def wrapped_key(self, seq: int) -> bytes:
        """The wrapped data key of row ``seq`` (a listing needs it only for a format 1 summary)."""
        found = self._query("SELECT wrapped_key FROM rows WHERE seq = ?", (seq,))
        if not found:
            raise IntegrityError("a listed row disappeared inside one snapshot")
        return _blob(found[0][0])

    def turn_has_rows(self, owner_tag: bytes, turn_tag: bytes, now: float) -> bool:
        """Whether one owner's turn has an unexpired row (an index lookup, nothing read)."""
        return bool(self._query(
            "SELECT 1 FROM rows WHERE owner_tag = ? AND turn_tag = ? AND expires_at > ? LIMIT 1",
            (owner_tag, turn_tag, now)))

    def read_summary(self, seq: int) -> bytes | None:
        """The sealed summary of row ``seq``."""
        found = self._query("SELECT sealed FROM summaries WHERE seq = ?", (seq,))
        return _blob(found[0][0]) if found else None

    def read_chunks(self, seq: int, first: int, last: int) -> Iterator[tuple[int, bytes]]:
        """Sealed chunks ``first..last`` (inclusive) of row ``seq``, as (index, sealed), in order, one at a time
        as the cursor steps: a full read of a large row never holds all of its sealed chunks at once (with the
        plaintext beside them, that doubled a read's memory, and fresh memory costs page faults). Iterate it
        inside :meth:`snapshot`, to its end or closing it."""
        base = seq << CHUNK_SHIFT
        with self._using() as connection, translate_errors():
            cursor = connection.execute(
                "SELECT pos, sealed FROM chunks WHERE pos BETWEEN ? AND ? ORDER BY pos", (base + first, base + last)
            )
            try:
                for pos, sealed in cursor:
                    yield pos - base, _blob(sealed)
            finally:  # whatever ends the read: a statement left active would hold its snapshot past COMMIT
                cursor.close()

    @staticmethod
    def update_expiry(connection: sqlite3.Connection, seq: int, expires_at: float, metadata: bytes,
                      sealed_summary: bytes) -> None:
        """Give row ``seq`` a new expiry with its re-sealed metadata and summary (inside a transaction)."""
        connection.execute("UPDATE rows SET expires_at = ?, metadata = ? WHERE seq = ?", (expires_at, metadata, seq))
        connection.execute("UPDATE summaries SET sealed = ? WHERE seq = ?", (sealed_summary, seq))

    def owner_has_rows(self, owner_tag: bytes) -> bool:
        """Whether any row (expired or not) belongs to this owner tag."""
        return bool(self._query("SELECT 1 FROM rows WHERE owner_tag = ? LIMIT 1", (owner_tag,)))

    def delete_row(self, seq: int, row_id: bytes) -> bool:
        """Delete one row, its summary and its chunks, then checkpoint so the WAL keeps no old copy; False if
        that row is no longer there (deleted meanwhile; its seq may belong to a newer row)."""
        with self.transaction() as connection:
            found = connection.execute("SELECT id FROM rows WHERE seq = ?", (seq,)).fetchone()
            if found is None or found[0] != row_id:
                return False
            _delete_seqs(connection, [seq])
        self.checkpoint()
        return True

    def delete_expired(self, now: float, progress: Callable[[int], None] | None = None) -> int:
        """Delete every row that expired at or before ``now``, in batches; returns how many. ``progress`` is
        called with the running total after each committed batch."""
        return self._delete_in_batches(_EXPIRED_BATCH, now, progress)

    def checkpoint(self) -> None:
        """Copy the WAL into the database and truncate it (old page images would otherwise linger there).
        A reader can keep it from finishing: it then waits at most briefly, and is retried after the next
        write and on close, rather than stalling the caller for the whole busy timeout.
        It runs after changes are committed, so it never fails the call that made them: a checkpoint that
        cannot run now (vault closing, database busy) stays pending."""
        try:
            with self._using() as connection, translate_errors():
                connection.execute("PRAGMA busy_timeout = 200")
                try:
                    busy = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
                finally:
                    connection.execute("PRAGMA busy_timeout = 30000")
        except StorageError:
            busy = True
        self._checkpoint_pending = bool(busy)

    def is_empty(self) -> bool:
        """No rows, no key commitments: nothing a new vault id and index key could orphan."""
        return not self._query(
            "SELECT 1 FROM rows UNION ALL SELECT 1 FROM owner_keys "
            "UNION ALL SELECT 1 FROM meta WHERE name = 'index_key_check' LIMIT 1")

    def stats(self, now: float) -> dict[str, Any]:
        """Row and byte counts (all rows, and by key version) and how many rows are expired but not yet
        collected."""
        rows, size, expired = self._query(_COUNTS, (now,))[0]
        by_version = self._query("SELECT key_version, count(*), coalesce(sum(size_bytes), 0) FROM rows "
                                 "GROUP BY key_version ORDER BY key_version")
        return {"rows": rows, "bytes": size, "expired_rows": expired,
                "by_key_version": {version: {"rows": count, "bytes": total} for version, count, total in by_version}}

    # -- key commitments (keys.manager.KeyCommitments) -------------------------------------------------
    def owner_checks(self, owner_tag: bytes) -> dict[int, bytes]:
        """Stored key commitments of an owner, by version."""
        found = self._query("SELECT version, check_value FROM owner_keys WHERE owner_tag = ?", (owner_tag,))
        return {version: _blob(value) for version, value in found}

    def record_owner_check(self, owner_tag: bytes, version: int, value: bytes, sealed_name: bytes) -> None:
        """Record an owner key commitment and register the owner (part of the open transaction, if any)."""
        with self._atomic() as connection:
            connection.execute("INSERT OR IGNORE INTO owner_keys (owner_tag, version, check_value) VALUES (?, ?, ?)",
                               (owner_tag, version, value))
            connection.execute("INSERT OR IGNORE INTO owners (owner_tag, sealed_name) VALUES (?, ?)",
                               (owner_tag, sealed_name))

    def forget_owner_checks(self, owner_tag: bytes, versions: set[int] | None) -> None:
        """Drop commitments of retired versions; None drops all of them and the owner's registration."""
        with self._atomic() as connection:
            if versions is None:
                connection.execute("DELETE FROM owner_keys WHERE owner_tag = ?", (owner_tag,))
                connection.execute("DELETE FROM owners WHERE owner_tag = ?", (owner_tag,))
            else:
                connection.executemany("DELETE FROM owner_keys WHERE owner_tag = ? AND version = ?",
                                       [(owner_tag, version) for version in sorted(versions)])

    def registered_owners(self) -> list[tuple[bytes, bytes]]:
        """(owner tag, sealed name) of every registered owner."""
        return [(_blob(tag), _blob(name)) for tag, name in self._query("SELECT owner_tag, sealed_name FROM owners")]

    @contextmanager
    def _atomic(self) -> Iterator[sqlite3.Connection]:
        """Join the open transaction of this thread, or run in a write transaction of its own."""
        with self._using() as connection:
            joined = connection.in_transaction
            if joined:
                with translate_errors():
                    yield connection
        if not joined:
            with self.transaction() as own:
                yield own

    # -- key lifecycle ---------------------------------------------------------------------------------
    def key_versions_in_use(self, owner_tag: bytes) -> dict[int, int]:
        """How many rows (expired or not) each key version of an owner still wraps."""
        found = self._query("SELECT key_version, count(*) FROM rows WHERE owner_tag = ? GROUP BY key_version",
                            (owner_tag,))
        return dict(found)

    @staticmethod
    def rows_to_rewrap(connection: sqlite3.Connection, owner_tag: bytes, primary: int,
                       limit: int) -> list[tuple[RowHeader, bytes | None]]:
        """Up to ``limit`` rows of an owner whose data key is wrapped under another version than ``primary``,
        each with its sealed summary (None if missing)."""
        return _with_summaries(connection.execute(_SELECT_OLD_VERSION, (owner_tag, primary, limit)).fetchall())

    @staticmethod
    def update_wrapped_key(connection: sqlite3.Connection, seq: int, version: int, wrapped_key: bytes,
                           sealed_summary: bytes | None) -> None:
        """Store a row's data key wrapped under another key version, and its summary sealed again under that
        version's turn key when it is of format 2 (``None``: a format 1 summary, which the DEK seals, stays)."""
        connection.execute("UPDATE rows SET key_version = ?, wrapped_key = ? WHERE seq = ?",
                           (version, wrapped_key, seq))
        if sealed_summary is not None:
            connection.execute("UPDATE summaries SET sealed = ? WHERE seq = ?", (sealed_summary, seq))

    def delete_owner_rows(self, owner_tag: bytes, progress: Callable[[int], None] | None = None) -> int:
        """Delete every row of an owner, in batches, then checkpoint; returns how many. ``progress`` is called
        with the running total after each committed batch."""
        return self._delete_in_batches(_OWNER_BATCH, owner_tag, progress)

    def _delete_in_batches(self, select: str, key: object, progress: Callable[[int], None] | None) -> int:
        """Delete the rows ``select`` finds, GC_BATCH per committed transaction (other writers get the lock in
        between), then checkpoint so the WAL keeps no old images."""
        removed = 0
        while True:
            with self.transaction() as connection:
                seqs = [seq for (seq,) in connection.execute(select, (key, GC_BATCH))]
                _delete_seqs(connection, seqs)
            removed += len(seqs)
            if progress is not None:
                progress(removed)
            if len(seqs) < GC_BATCH:
                break
        if removed:
            self.checkpoint()
        return removed

    def index_check(self) -> bytes | None:
        """The stored commitment of the index key."""
        return self.get_meta("index_key_check")

    def record_index_check(self, value: bytes) -> None:
        """Record the index key commitment (part of the open transaction, if any; else its own)."""
        self._query("INSERT OR IGNORE INTO meta (name, value) VALUES ('index_key_check', ?)", (value,))


def inspect(path: Path, now: float) -> dict[str, object]:
    """Read-only facts about a database file for ``doctor``: schema version, vault id, counts (no keys)."""
    uri = "file:" + urllib.parse.quote(os.fsencode(path)) + "?mode=ro"
    with translate_errors():
        connection = sqlite3.connect(uri, uri=True, timeout=5.0)
        try:
            facts: dict[str, object] = {"schema_version": connection.execute("PRAGMA user_version").fetchone()[0]}
            if facts["schema_version"] == 0:
                return facts
            vault_id = connection.execute("SELECT value FROM meta WHERE name = 'vault_id'").fetchone()
            facts["vault_id"] = _blob(vault_id[0]).hex() if vault_id else None
            facts["ids_indexed"] = _has_id_index(connection)
            rows, size, expired = connection.execute(_COUNTS, (now,)).fetchone()
            facts.update(rows=rows, bytes=size, expired_rows=expired)
            facts["owners"] = connection.execute("SELECT count(*) FROM owners").fetchone()[0]
            facts["rows_by_key_version"] = dict(connection.execute(
                "SELECT key_version, count(*) FROM rows GROUP BY key_version ORDER BY key_version").fetchall())
            facts["integrity_check"] = connection.execute("PRAGMA quick_check").fetchone()[0]
            return facts
        finally:
            connection.close()


def _delete_seqs(connection: sqlite3.Connection, seqs: list[int]) -> None:
    """Delete rows with their summaries and chunks. Chunks go under secure_delete=FAST: their pages are not
    zeroed, and need not be, since their key goes with the row. Rows and summaries go under ON, which also
    zeroes pages and cells freed when the b-tree rebalances: FAST alone leaves copies of other rows' cells,
    wrapped keys included, in pages it frees (threat_model.md, "Deletion")."""
    ranges = [(seq << CHUNK_SHIFT, (seq << CHUNK_SHIFT) | (MAX_CHUNKS - 1)) for seq in seqs if _valid_seq(seq)]
    connection.execute("PRAGMA secure_delete = FAST")
    try:
        connection.executemany("DELETE FROM chunks WHERE pos BETWEEN ? AND ?", ranges)
    finally:
        connection.execute("PRAGMA secure_delete = ON")
    connection.executemany("DELETE FROM summaries WHERE seq = ?", [(seq,) for seq in seqs])
    connection.executemany("DELETE FROM rows WHERE seq = ?", [(seq,) for seq in seqs])


def _has_id_index(connection: sqlite3.Connection) -> bool:
    """Whether ``rows`` has a unique index on ``id`` alone (files made before schema 3 have one)."""
    for _, name, unique, _, partial in connection.execute("PRAGMA index_list(rows)").fetchall():
        columns = [column for _, _, column in connection.execute("SELECT * FROM pragma_index_info(?)", (name,))]
        if unique and not partial and columns == ["id"]:
            return True
    return False


def _valid_seq(seq: object) -> bool:
    return type(seq) is int and 1 <= seq < MAX_SEQ


def _header(row: tuple) -> RowHeader:
    """A row as stored; a column of the wrong type or range (only a writer of the file makes one) is tampering."""
    seq, row_id, owner_tag, turn_tag, key_version, expires_at, size_bytes, wrapped_key, metadata = row
    if not (_valid_seq(seq) and type(key_version) is int and 1 <= key_version <= MAX_KEY_VERSION
            and type(size_bytes) is int and 0 <= size_bytes < 2**63 and type(expires_at) in (int, float)):
        raise IntegrityError("a stored row has columns of the wrong type")
    return RowHeader(seq, _blob(row_id), _blob(owner_tag), _blob(turn_tag), key_version, float(expires_at),
                     size_bytes, _blob(wrapped_key), _blob(metadata))


def _with_summaries(found: list[tuple]) -> list[tuple[RowHeader, bytes | None]]:
    """Rows selected with their summary as the last column: (header, sealed summary or None if missing)."""
    return [(_header(row[:-1]), None if row[-1] is None else _blob(row[-1])) for row in found]


def _blob(value: object) -> bytes:
    if not isinstance(value, bytes):
        raise IntegrityError("a stored column that holds bytes holds something else")
    return value


_CORRUPT = ("malformed", "not a database", "corrupt", "file is encrypted")


class _TranslateErrors:
    """sqlite3 errors become VaultError subclasses: corruption is IntegrityError, the rest StorageError.
    A class rather than a generator: it wraps every statement, and this is cheaper per use."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, _trace: object) -> None:
        if error is None:
            return
        if isinstance(error, OverflowError):  # an integer SQLite cannot hold: only a damaged file has one
            raise IntegrityError("a stored value is out of range") from None
        if isinstance(error, sqlite3.Error):
            message = str(error)
            # a writer stored non-UTF-8 text where the vault reads text; SQLite's message quotes it: not ours
            if message.startswith("Could not decode to UTF-8"):
                raise IntegrityError("a stored column holds text that is not UTF-8") from None
            if isinstance(error, sqlite3.DatabaseError) and any(word in message for word in _CORRUPT):
                raise IntegrityError("the database file is corrupt (SQLite: " + message + ")") from None
            if "closed" in message:
                raise StorageError("the vault is closed") from None
            raise StorageError(f"database error ({type(error).__name__}: {message})") from None


_TRANSLATE = _TranslateErrors()


def translate_errors() -> _TranslateErrors:
    """The context manager that translates sqlite3 errors (see _TranslateErrors)."""
    return _TRANSLATE
