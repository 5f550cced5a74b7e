"""SQLite files as each release laid them out, and the facts of a file's schema (its version, its indexes on ids).

Read and written with sqlite3 directly, nothing of the vault's code: upgrade tests build the files an older
scratchvault left behind, and check what this one made of them.
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from pathlib import Path

# scratchvault's first layout (schema 1): AUTOINCREMENT seqs, no owners table
SCHEMA_V1_FIRST = """
CREATE TABLE meta (name TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE rows (seq INTEGER PRIMARY KEY AUTOINCREMENT, id BLOB NOT NULL UNIQUE, owner_tag BLOB NOT NULL,
    turn_tag BLOB NOT NULL, key_version INTEGER NOT NULL, expires_at REAL NOT NULL, size_bytes INTEGER NOT NULL,
    wrapped_key BLOB NOT NULL, metadata BLOB NOT NULL);
CREATE INDEX rows_owner_turn ON rows (owner_tag, turn_tag);
CREATE INDEX rows_expiry ON rows (expires_at);
CREATE TABLE summaries (seq INTEGER PRIMARY KEY, sealed BLOB NOT NULL);
CREATE TABLE chunks (pos INTEGER PRIMARY KEY, sealed BLOB NOT NULL);
CREATE TABLE owner_keys (owner_tag BLOB NOT NULL, version INTEGER NOT NULL, check_value BLOB NOT NULL,
    PRIMARY KEY (owner_tag, version)) WITHOUT ROWID;
"""

# The tables exactly as scratchvault made them before schema 3 (row ids random, found through an index on id).
SCHEMA_V2 = """
CREATE TABLE meta (name TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE rows (
    seq INTEGER PRIMARY KEY,
    id BLOB NOT NULL UNIQUE,
    owner_tag BLOB NOT NULL,
    turn_tag BLOB NOT NULL,
    key_version INTEGER NOT NULL,
    expires_at REAL NOT NULL,
    size_bytes INTEGER NOT NULL,
    wrapped_key BLOB NOT NULL,
    metadata BLOB NOT NULL
);
CREATE INDEX rows_owner_turn ON rows (owner_tag, turn_tag);
CREATE INDEX rows_expiry ON rows (expires_at);
CREATE TABLE summaries (seq INTEGER PRIMARY KEY, sealed BLOB NOT NULL);
CREATE TABLE chunks (pos INTEGER PRIMARY KEY, sealed BLOB NOT NULL);
CREATE TABLE owner_keys (
    owner_tag BLOB NOT NULL,
    version INTEGER NOT NULL,
    check_value BLOB NOT NULL,
    PRIMARY KEY (owner_tag, version)
) WITHOUT ROWID;
CREATE TABLE owners (owner_tag BLOB PRIMARY KEY, sealed_name BLOB NOT NULL) WITHOUT ROWID;
"""


def _laid_out(path: Path, schema: str, version: int) -> Path:
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.executescript(schema)
        conn.execute(f"PRAGMA user_version = {version}")
    os.chmod(path, 0o600)
    return path


def legacy_file(path: Path, user_version: int = 2) -> Path:
    """An empty database file laid out as before schema 3 (WAL, the v2 tables), for upgrade tests."""
    return _laid_out(path, SCHEMA_V2, user_version)


def first_layout(path: Path) -> Path:
    """An empty database file laid out as scratchvault's first release made it (schema 1)."""
    return _laid_out(path, SCHEMA_V1_FIRST, 1)


def not_a_vault(path: Path) -> Path:
    """A private SQLite file with a table of its own and no schema version: SQLite, but no vault."""
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
        conn.commit()
    path.chmod(0o600)
    return path


def user_version(db: Path) -> int:
    """The file's schema version."""
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute("PRAGMA user_version").fetchone()[0]


def set_user_version(db: Path, version: int) -> None:
    """Give the file another schema version (as a newer scratchvault would)."""
    with closing(sqlite3.connect(db)) as conn:
        conn.execute(f"PRAGMA user_version = {version}")


def id_indexes(db: Path) -> list[str]:
    """Names of the unique indexes on rows(id) alone."""
    with closing(sqlite3.connect(db)) as conn:
        return [name for _, name, unique, _, _ in conn.execute("PRAGMA index_list(rows)")
                if unique and [c for *_, c in conn.execute("SELECT * FROM pragma_index_info(?)", (name,))] == ["id"]]


def as_schema_3(db: Path) -> Path:
    """Turn a file this scratchvault made back into what schema 3 made: no index on (owner_tag, size_bytes)."""
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("DROP INDEX rows_owner_usage")
        conn.execute("PRAGMA user_version = 3")
    return db


def usage_index(db: Path) -> list[str]:
    """The columns of the index quotas count with (empty when the file has none)."""
    with closing(sqlite3.connect(db)) as conn:
        return [c for *_, c in conn.execute("SELECT * FROM pragma_index_info('rows_owner_usage')")]
