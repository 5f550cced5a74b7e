"""The database file as a reader of it sees it, and files laid out as before schema 3 (for upgrade tests).

Reads the SQLite file directly, with no index consulted and nothing of the vault's code.
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from pathlib import Path

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


def legacy_file(path: Path, user_version: int = 2) -> Path:
    """An empty database file laid out as before schema 3 (WAL, the v2 tables), for upgrade tests."""
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.executescript(SCHEMA_V2)
        conn.execute(f"PRAGMA user_version = {user_version}")
    os.chmod(path, 0o600)
    return path


def seq_of(db: Path, row_id: str) -> int:
    """The seq of the row storing ``row_id``, as a reader of the file sees it (no index consulted)."""
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute("SELECT seq FROM rows NOT INDEXED WHERE id = ?", (bytes.fromhex(row_id),)).fetchone()[0]


def table_counts(db: Path) -> tuple[int, ...]:
    """How many rows, summaries and chunks the file holds."""
    with closing(sqlite3.connect(db)) as conn:
        return tuple(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("rows", "summaries", "chunks"))


def user_version(db: Path) -> int:
    """The file's schema version."""
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute("PRAGMA user_version").fetchone()[0]
