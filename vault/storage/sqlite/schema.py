"""The SQLite file's tables, its schema version and its statements, and the checks on what comes back from it.

A row's sealed summary, and the only chunk of a row of one chunk, are kept in its ``rows`` record (``summary``,
``chunk``): a small row is one b-tree insert. The chunks of larger rows live in ``chunks`` under the integer key
``seq << 20 | index``, so a slice is a rowid range read and a delete is a rowid range delete. Rows written before
schema 6 keep their summary in ``summaries`` and every chunk in ``chunks`` (their ``summary`` and ``chunk`` are
NULL) until a rewrap or extend writes their summary again, into the row. Files made at schema 3 or later have no
index on row ids: a row is found at the seq its id names.
"""

from __future__ import annotations

import sqlite3

from vault.errors import IntegrityError, StorageError
from vault.storage.sqlite import catalog

# 2: row format 2 (binary metadata; summaries under turn keys). Raised on open, so a scratchvault that knows only
# version 1 (which would rewrap format 2 summaries without re-sealing them) refuses the file from then on.
# 3: row ids encrypt the row's seq; a file made at version 3 has no index on ids, so an older scratchvault, whose
# random ids this one could not find, must refuse it. A file made before keeps its index.
# 4: owner keys in write-once keyring entries, one per version, reserved here first, and tombstones of destroyed
# versions (an older scratchvault would read and rewrite the one mutable keyset entry); an index on rows
# (owner_tag, size_bytes) that counts an owner's rows and bytes for quotas; deletion ledgers (threat_model.md,
# "Rollback": an older scratchvault would delete without recording it). An older scratchvault must refuse it.
# 5: the keys of expiry epochs (threat_model.md, "Expiry epochs"): epoch_keys, epoch_reservations, epoch_tombstones.
# Raised on open, so the previous release, which knows nothing of epoch keys, refuses the file from then on.
# 6: a row's summary, and a one-chunk row's chunk, in its rows record (the columns summary and chunk, added to
# older files, whose rows keep theirs where they were). The previous release would not see them: it must refuse.
SCHEMA_VERSION = 6
INLINE_COLUMNS = ("summary BLOB", "chunk BLOB")  # added, in this order, to rows of a file made before schema 6
CHUNK_SHIFT = 20
MAX_CHUNKS = 1 << CHUNK_SHIFT  # chunks per row: the low 20 bits of a chunk's key
MAX_SEQ = 1 << (63 - CHUNK_SHIFT)  # chunk keys must fit SQLite's signed 64-bit integers
GC_BATCH = 2000
SCHEMA = """
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
    metadata BLOB NOT NULL,
    summary BLOB,
    chunk BLOB
);
CREATE INDEX IF NOT EXISTS rows_owner_turn ON rows (owner_tag, turn_tag);
CREATE INDEX IF NOT EXISTS rows_expiry ON rows (expires_at);
CREATE INDEX IF NOT EXISTS rows_owner_usage ON rows (owner_tag, size_bytes);
CREATE TABLE IF NOT EXISTS summaries (seq INTEGER PRIMARY KEY, sealed BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS chunks (pos INTEGER PRIMARY KEY, sealed BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS owner_keys (
    owner_tag BLOB NOT NULL,
    version INTEGER NOT NULL,
    check_value BLOB NOT NULL,
    PRIMARY KEY (owner_tag, version)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS owners (owner_tag BLOB PRIMARY KEY, sealed_name BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS key_reservations (
    owner_tag BLOB NOT NULL,
    version INTEGER NOT NULL,
    reserved_at REAL NOT NULL,
    PRIMARY KEY (owner_tag, version)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS key_tombstones (
    owner_tag BLOB NOT NULL,
    version INTEGER NOT NULL,
    check_value BLOB NOT NULL,
    swept INTEGER NOT NULL,
    PRIMARY KEY (owner_tag, version)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS deletions (
    owner_tag BLOB PRIMARY KEY,
    counter INTEGER NOT NULL,
    body BLOB NOT NULL,
    tag BLOB NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS epoch_keys (
    length INTEGER NOT NULL,
    epoch INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    check_value BLOB NOT NULL,
    PRIMARY KEY (length, epoch)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS epoch_reservations (
    length INTEGER NOT NULL,
    epoch INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    reserved_at REAL NOT NULL,
    PRIMARY KEY (length, epoch, attempt)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS epoch_tombstones (
    length INTEGER NOT NULL,
    epoch INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    check_value BLOB NOT NULL,
    swept INTEGER NOT NULL,
    PRIMARY KEY (length, epoch, attempt)
) WITHOUT ROWID;
"""
ALLOWED = catalog.allowed(SCHEMA)
# what a file of schema 5 or earlier may hold before its upgrade: rows without the inline columns
ALLOWED_BEFORE_INLINE = catalog.allowed(SCHEMA.replace(",\n    summary BLOB,\n    chunk BLOB\n", "\n"))
INSERT_ROW = (
    "INSERT INTO rows (seq, id, owner_tag, turn_tag, key_version, expires_at, size_bytes, wrapped_key, metadata, "
    "summary, chunk) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
INSERT_CHUNK = "INSERT INTO chunks (pos, sealed) VALUES (?, ?)"
# a row's summary where it is: in the row, else (a row written before schema 6) in summaries, looked up only then
SELECT_SUMMARY = ("SELECT coalesce(summary, (SELECT sealed FROM summaries WHERE seq = ?1)) FROM rows "
                  "WHERE seq = ?1")
SELECT_INLINE_CHUNK = "SELECT chunk FROM rows WHERE seq = ?"
# a summary sealed again goes into its row; the copy an older row kept in summaries goes (zeroed: secure_delete ON)
DELETE_OLD_SUMMARY = "DELETE FROM summaries WHERE seq = ?"
SELECT_ROW_BY_SEQ = (
    "SELECT rows.seq, id, owner_tag, turn_tag, key_version, expires_at, size_bytes, wrapped_key, metadata FROM rows "
    "WHERE seq = ?"
)
SELECT_ROW_BY_ID = (  # files made before schema 3, which have an index on ids
    "SELECT rows.seq, id, owner_tag, turn_tag, key_version, expires_at, size_bytes, wrapped_key, metadata FROM rows "
    "WHERE id = ?"
)
# a put's one read: the next seq and the recorded commitment of the owner key version that will wrap the row
NEXT_ROW = ("SELECT (SELECT coalesce(max(seq), 0) + 1 FROM rows), "
            "(SELECT check_value FROM owner_keys WHERE owner_tag = ?1 AND version = ?2 AND NOT EXISTS (SELECT 1 "
            "FROM key_tombstones WHERE owner_tag = ?1 AND version = ?2)), "
            "(SELECT check_value FROM epoch_keys k WHERE length = ?3 AND epoch = ?4 AND NOT EXISTS (SELECT 1 "
            "FROM epoch_tombstones t WHERE t.length = ?3 AND t.epoch = ?4 AND t.attempt IN (0, k.attempt)))")
# an owner's stored rows and bytes, read from rows_owner_usage alone (a covering index: no table page is read)
# an owner's rows and bytes for quotas: their ledger of deleted rows counts as bytes too (it grows with deletes)
OWNER_USAGE = ("SELECT count(*), coalesce(sum(size_bytes), 0) "
               "+ coalesce((SELECT length(body) FROM deletions WHERE owner_tag = ?1), 0) "
               "FROM rows WHERE owner_tag = ?1")
COUNTS = "SELECT count(*), coalesce(sum(size_bytes), 0), coalesce(sum(expires_at <= ?), 0) FROM rows"
EXPIRED_BATCH = "SELECT seq FROM rows WHERE expires_at <= ? LIMIT ?"
SELECT_EXPIRING = (  # rows a gc ahead of the clock collects while they are still live
    "SELECT seq, id, owner_tag, turn_tag, key_version, expires_at, size_bytes, wrapped_key, metadata FROM rows "
    "WHERE expires_at > ? AND expires_at <= ?"
)
OWNER_BATCH = "SELECT seq FROM rows WHERE owner_tag = ? LIMIT ?"
SELECT_OLD_VERSION = (
    "SELECT rows.seq, id, owner_tag, turn_tag, key_version, expires_at, size_bytes, wrapped_key, metadata, "
    "coalesce(rows.summary, (SELECT sealed FROM summaries WHERE summaries.seq = rows.seq)) "
    "FROM rows WHERE owner_tag = ? AND (key_version != ? OR length(wrapped_key) != ?) "
    "LIMIT ?"  # the third ?: a format 3 key's size
)
SELECT_TURN = (
    "SELECT rows.seq, id, owner_tag, turn_tag, key_version, expires_at, size_bytes, wrapped_key, metadata, "
    "coalesce(rows.summary, (SELECT sealed FROM summaries WHERE summaries.seq = rows.seq)) "
    "FROM rows WHERE owner_tag = ? AND turn_tag = ? AND expires_at > ?"
)
# what a listing needs and no more (no metadata), in insertion order (the owner/turn index is ordered by seq)
SELECT_TURN_SUMMARIES = (
    "SELECT rows.seq, id, key_version, expires_at, size_bytes, "
    "coalesce(rows.summary, (SELECT sealed FROM summaries WHERE summaries.seq = rows.seq)) FROM rows "
    "WHERE owner_tag = ? AND turn_tag = ? AND expires_at > ? ORDER BY rows.seq"
)


def migrate(connection: sqlite3.Connection) -> bool:
    """Create missing tables and raise the schema version (inside the caller's write transaction); a file of a
    newer scratchvault, or one holding schema objects scratchvault did not make, is refused. Returns whether the
    file finds rows through an index on ids. The version is read first: a newer scratchvault's tables are not
    another writer's."""
    found = connection.execute("PRAGMA user_version").fetchone()[0]
    if found > SCHEMA_VERSION:
        raise StorageError("the database was written by a newer scratchvault; upgrade to open it")
    foreign = foreign_objects(connection, ALLOWED if found >= SCHEMA_VERSION else ALLOWED | ALLOWED_BEFORE_INLINE)
    if foreign:
        raise IntegrityError(f"the database holds schema objects scratchvault did not make ({', '.join(foreign)}): "
                             "a trigger or view can keep rows a delete removes, or copy them; refusing the file. "
                             "Restore it from backup (or drop those objects after checking what they did)")
    for statement in filter(str.strip, SCHEMA.split(";")):
        connection.execute(statement)
    if found < SCHEMA_VERSION:
        _add_inline_columns(connection)
        connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    return has_id_index(connection)


def _add_inline_columns(connection: sqlite3.Connection) -> None:
    """Give ``rows`` of a file made before schema 6 its summary and chunk columns (NULL in every row it holds: those
    rows' summaries and chunks stay in their tables). The text SQLite keeps of the table is then the current
    definition's, white space aside (catalog.py compares it so)."""
    columns = {name for _, name, *_ in connection.execute("PRAGMA table_info(rows)")}
    for column in INLINE_COLUMNS:
        if column.split()[0] not in columns:
            connection.execute(f"ALTER TABLE rows ADD COLUMN {column}")


def has_id_index(connection: sqlite3.Connection) -> bool:
    """Whether ``rows`` has a unique index on ``id`` alone (files made before schema 3 have one)."""
    return bool(_id_indexes(connection))


def _id_indexes(connection: sqlite3.Connection) -> set[str]:
    """Names of the unique, whole-table indexes on ``rows(id)`` alone."""
    found = set()
    for _, name, unique, _, partial in connection.execute("PRAGMA index_list(rows)").fetchall():
        columns = [column for _, _, column in connection.execute("SELECT * FROM pragma_index_info(?)", (name,))]
        if unique and not partial and columns == ["id"]:
            found.add(name)
    return found


def foreign_objects(connection: sqlite3.Connection, allowed: frozenset[catalog.CatalogEntry] = ALLOWED) -> list[str]:
    """The kinds of schema object in the file that scratchvault did not make, sorted (vault/storage/sqlite/catalog.py:
    every object is compared with exactly what the vault made, its definition's text included)."""
    return catalog.kinds(catalog.unexpected(connection, allowed))


def check_schema(connection: sqlite3.Connection, tables: frozenset[str]) -> None:
    """IntegrityError unless everything on ``tables`` is exactly as the vault made it: run inside every write that
    must stick, on the tables it changes, before it commits (the write lock is held, so the schema stays as checked
    until it ends). A connection that found them so at the current schema cookie is not asked again: any change to
    the schema that its statements would see raises the cookie (connections.CheckedConnection)."""
    cookie = connection.execute("PRAGMA schema_version").fetchone()[0]
    seen, verified = getattr(connection, "checked", (-1, frozenset()))
    if seen == cookie and tables <= verified:  # unchanged since this connection found them as the vault made them
        return
    catalog.check(connection, ALLOWED, tables)
    if hasattr(connection, "checked"):
        connection.checked = (cookie, tables | (verified if seen == cookie else frozenset()))





def valid_seq(seq: object) -> bool:
    """A seq this file can hold a row at."""
    return type(seq) is int and 1 <= seq < MAX_SEQ
