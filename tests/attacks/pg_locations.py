"""Where the PostgreSQL attacker's vaults live, and its copies of them: a schema of the session's test database
(tests/support/postgres.py) for each location, and whole schemas copied and put back, as a backup taken and
restored by whoever holds the tables.

A vault runs as the least-privilege app role; the attacker connects to the same database and schema as the
superuser. A suite that names its vaults by path (tamper_world.py: ``root / "a" / "v.db"``) gets, for each path, a
schema of its own, made on first use; a URL (the ``db_path`` fixture's under SCRATCHVAULT_TEST_STORE=postgres)
names its database and schema itself. ``use`` gives this module the session's test database (conftest.py).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

from tests.support.postgres import APP_ROLE, TestDatabase, with_role

_database: list[TestDatabase] = []  # the session's test database, once ``use`` gave it
_made: dict[Path, str] = {}  # the schemas made for paths in this process, by path
_pending: dict[Path, str] = {}  # paths copy_tree gave a copy not made yet: the schema to copy, by path
_open: dict[tuple[int, str], psycopg.Connection] = {}  # one superuser connection per process and database
_SEARCH_PATH = re.compile(r"search_path=([A-Za-z_][A-Za-z0-9_]*)")


def use(database: TestDatabase) -> None:
    """The test database the attacker's paths get their schemas in (the session's, from conftest.py)."""
    _database[:] = [database]


def database() -> TestDatabase:
    assert _database, "no test database: the attacker_for fixture gives it (tests/conftest.py)"
    return _database[0]


def resolve(location: str | Path) -> tuple[str, str, str]:
    """(the vault's URL, the attacker's superuser URL, the schema) of a location: a URL names its database and
    schema; a path gets a schema of its own, owned by the app role, made on first use."""
    if isinstance(location, str):
        parts = psycopg.conninfo.conninfo_to_dict(location)
        found = _SEARCH_PATH.search(urllib.parse.unquote(str(parts.get("options") or "")))
        schema = found.group(1) if found else "public"
        admin = with_role(database().admin_url, user=None, password=None, dbname=str(parts["dbname"]), schema=schema)
        return location, admin, schema
    path = Path(location)
    schema = _made.get(path) or "p_" + hashlib.sha256(str(path).encode()).hexdigest()[:24]
    if path in _pending:
        copy_schema(_pending.pop(path), schema)
    elif path not in _made:
        database().execute(f"CREATE SCHEMA IF NOT EXISTS {schema} AUTHORIZATION {APP_ROLE}")
    _made[path] = schema
    return database().url(schema=schema), database().url(superuser=True, schema=schema), schema


@contextmanager
def connected(url: str, schema: str) -> Iterator[psycopg.Connection]:
    """A superuser's transaction in the database of ``url`` with ``schema`` as its search_path, committed when
    the block ends (rolled back if it raises). The process's connection to that database is reused: connecting
    costs more than most of what an attacker does; none of its statements is kept prepared (it alters tables)."""
    parts = psycopg.conninfo.conninfo_to_dict(url)
    parts.pop("options", None)
    key = (os.getpid(), psycopg.conninfo.make_conninfo(**parts))
    connection = _open.get(key)
    if connection is not None:
        try:
            connection.execute(f"SET search_path = {schema}")
        except psycopg.OperationalError:  # the server dropped it (a test restarted the server)
            connection = None
    if connection is None:
        connection = _open[key] = psycopg.connect(key[1], autocommit=False, prepare_threshold=None)
        connection.execute(f"SET search_path = {schema}")
    try:
        yield connection
    except BaseException:
        connection.rollback()
        raise
    connection.commit()


# an index's definition without its name and schema: what LIKE ... INCLUDING ALL copies, under a name of its own
_INDEXES = ("SELECT indexname, regexp_replace(indexdef, 'INDEX \\S+ ON \\S+ ', 'INDEX ON ') FROM pg_indexes "
            "WHERE schemaname = %s AND tablename = %s")


def name_indexes_as(run, source: str, target: str, table: str) -> None:
    """Give the indexes LIKE copied to ``target`` the names they have in ``source`` (a restored dump keeps them)."""
    theirs = {definition: name for name, definition in run(_INDEXES, (source, table)).fetchall()}
    for name, definition in run(_INDEXES, (target, table)).fetchall():
        if theirs.get(definition, name) != name:
            run(f"ALTER INDEX {target}.{name} RENAME TO {theirs[definition]}")


def copy_schema(source: str, target: str) -> None:
    """Replace schema ``target`` with a copy of ``source``: every table (columns, constraints, indexes, storage)
    with its rows and owner, and every sequence where it stood (what a restored dump of the schema would be)."""
    with connected(database().url(superuser=True), "public") as connection:
        run = connection.execute
        run(f"DROP SCHEMA IF EXISTS {target} CASCADE")
        (schema_owner,) = run("SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = %s",
                              (source,)).fetchone()
        run(f"CREATE SCHEMA {target} AUTHORIZATION {schema_owner}")
        for (table,) in run("SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY 1", (source,)).fetchall():
            run(f"CREATE TABLE {target}.{table} (LIKE {source}.{table} INCLUDING ALL)")
            name_indexes_as(run, source, target, table)
            run(f"INSERT INTO {target}.{table} SELECT * FROM {source}.{table}")
            (table_owner,) = run("SELECT relowner::regrole::text FROM pg_class WHERE oid = %s::regclass",
                                 (f"{source}.{table}",)).fetchone()
            run(f"ALTER TABLE {target}.{table} OWNER TO {table_owner}")
        sequences = run("SELECT sequencename, sequenceowner, data_type, min_value, max_value, increment_by, cycle, "
                        "start_value, last_value FROM pg_sequences WHERE schemaname = %s", (source,)).fetchall()
        for name, role, kind, low, high, step, cycle, start, last in sequences:
            run(f"CREATE SEQUENCE {target}.{name} AS {kind} MINVALUE {low} MAXVALUE {high} INCREMENT {step} "
                f"START {start} {'CYCLE' if cycle else 'NO CYCLE'}")
            run(f"ALTER SEQUENCE {target}.{name} OWNER TO {role}")
            if last is not None:
                run("SELECT setval(%s::regclass, %s, true)", (f"{target}.{name}", last))


def copy_tree(source: Path, target: Path) -> None:
    """A copy of directory ``source`` at ``target`` with a copy of every vault made for a path under it, each
    made when first used (the suites copy vaults that do not change meanwhile, and use some copies only)."""
    shutil.copytree(source, target)
    for path, schema in list(_made.items()):
        if path.is_relative_to(source):
            _pending[target / path.relative_to(source)] = schema


def discard(under: Path | None = None) -> None:
    """Drop the schemas made for paths under ``under`` (None: all of them)."""
    for path in [path for path in _pending if under is None or path.is_relative_to(under)]:
        del _pending[path]
    for path in [path for path in _made if under is None or path.is_relative_to(under)]:
        database().execute(f"DROP SCHEMA IF EXISTS {_made.pop(path)} CASCADE")
