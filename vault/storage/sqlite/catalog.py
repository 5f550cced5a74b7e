"""The SQLite file's schema as an allowlist: ``sqlite_schema`` as a whole must hold exactly what scratchvault made.

Every object (table, index, trigger, view) is compared by its type, name, table and the text SQLite keeps of its
definition (white space aside), against the objects a fresh file of this release holds, those a file made by an
earlier release kept through its upgrades (``rows`` with a unique ``id``, and with AUTOINCREMENT), and SQLite's
own bookkeeping tables. So a constraint, foreign key, CHECK, default, unique or partial index, trigger or view a
writer of the file adds, even under one of the vault's own names, is refused: checked when the store opens and
inside every write that must stick (a delete, a key's destruction, an epoch's closing) before it commits, there on
the tables that write changes: only their objects run inside it, and a shred's keys still go when something sits on
``rows`` (threat_model.md, "What the database cannot move").
"""

from __future__ import annotations

import functools
import re
import sqlite3

from vault.errors import IntegrityError

CatalogEntry = tuple[str, str, str, str | None]  # (type, name, table, sql) as sqlite_schema holds them

# the definitions of ``rows`` that earlier releases made and their upgrades kept (an index on ids by UNIQUE), up to
# their last column of then; the columns added since follow as the current definition has them
_EARLIER_ROWS = tuple(
    "CREATE TABLE rows (\n    seq INTEGER PRIMARY KEY" + autoincrement + ",\n    id BLOB NOT NULL UNIQUE,\n"
    "    owner_tag BLOB NOT NULL,\n    turn_tag BLOB NOT NULL,\n    key_version INTEGER NOT NULL,\n"
    "    expires_at REAL NOT NULL,\n    size_bytes INTEGER NOT NULL,\n    wrapped_key BLOB NOT NULL,\n"
    "    metadata BLOB NOT NULL" for autoincrement in ("", " AUTOINCREMENT"))
_LAST_EARLY_COLUMN = "metadata BLOB NOT NULL"
# SQLite's own: AUTOINCREMENT's counters, and what an operator's ANALYZE writes
_SQLITE_OWN = ("ANALYZE",)
_READ = "SELECT type, name, tbl_name, sql FROM sqlite_schema"
_SPACE, _AROUND = re.compile(r"\s+"), re.compile(r" ?([(),]) ?")


@functools.lru_cache(maxsize=512)
def _normal(entry: tuple[object, ...]) -> CatalogEntry:
    """An object as compared: its definition with runs of white space made one space, and none around parentheses
    and commas (how a release laid its statements out is no part of what they define). Remembered: a file's few
    dozen objects are read inside every delete."""
    kind, name, table, sql = entry
    text = None if sql is None else _AROUND.sub(r"\1", _SPACE.sub(" ", str(sql)).strip())
    return str(kind), str(name), str(table), text


def _read(connection: sqlite3.Connection) -> set[CatalogEntry]:
    return {_normal(entry) for entry in connection.execute(_READ).fetchall()}


def _made_by(statements: list[str]) -> set[CatalogEntry]:
    """What ``sqlite_schema`` holds after ``statements`` run on an empty database."""
    database = sqlite3.connect(":memory:")
    try:
        for statement in statements:
            database.execute(statement)
        return _read(database)
    finally:
        database.close()


def allowed(schema: str) -> frozenset[CatalogEntry]:
    """Every object a file of the vault may hold: this release's ``schema`` (its statements separated by ``;``)
    run on an empty file, the same after each earlier ``rows``, and SQLite's bookkeeping tables."""
    current = [statement for statement in schema.split(";") if statement.strip()]
    found = _made_by(current)
    others = [statement for statement in current if "CREATE TABLE IF NOT EXISTS rows " not in statement]
    rows = next(statement for statement in current if "CREATE TABLE IF NOT EXISTS rows " in statement)
    added_since = rows.split(_LAST_EARLY_COLUMN, 1)[1]  # the columns after metadata, and the closing parenthesis
    for earlier_rows in _EARLIER_ROWS:
        found |= _made_by([earlier_rows + added_since, *others])
    found |= _made_by(["CREATE TABLE t (x INTEGER PRIMARY KEY AUTOINCREMENT)", "INSERT INTO t VALUES (1)",
                       "CREATE INDEX i ON t (x)", *_SQLITE_OWN])
    names = _names(current)
    return frozenset(entry for entry in found if (entry[1] in names or entry[1].startswith("sqlite_"))
                     and entry[2] != "t")


def _names(statements: list[str]) -> tuple[str, ...]:
    """The names the vault's statements create (its tables and indexes), each exactly."""
    return tuple(statement.split("EXISTS", 1)[1].split()[0] for statement in statements if "EXISTS" in statement)


def unexpected(connection: sqlite3.Connection, expected: frozenset[CatalogEntry],
               tables: frozenset[str] | None = None) -> list[CatalogEntry]:
    """The objects of the file that are not in ``expected``, sorted (empty: the schema is the vault's); with
    ``tables``, only those on these tables (a table in their place, or an index, trigger or constraint on one)."""
    found = _read(connection) - expected
    return sorted((entry for entry in found if tables is None or entry[2] in tables), key=repr)


def kinds(found: list[CatalogEntry]) -> list[str]:
    """The kinds of the unexpected objects, for a message: no definition text (it may be anyone's)."""
    return sorted({kind if kind in ("table", "index", "trigger", "view") else "object" for kind, *_ in found})


def check(connection: sqlite3.Connection, expected: frozenset[CatalogEntry],
          tables: frozenset[str] | None = None) -> None:
    """IntegrityError unless every object of the file (with ``tables``: on those tables) is one the vault made, as
    it made it."""
    found = unexpected(connection, expected, tables)
    if found:
        raise IntegrityError(f"the database holds schema objects scratchvault did not make ({', '.join(kinds(found))})"
                             ": a trigger, constraint, index or view can keep rows a delete removes, copy them, or "
                             "undo a key's destruction; refusing it. Restore the file from backup (or drop those "
                             "objects after checking what they did)")
