"""A consistent copy of a vault's PostgreSQL tables into another schema or database, as a backup job would take
one (the demo shows that a shredded owner's rows in such a copy stay unreadable). Rows travel through the
client in COPY's binary format, from one REPEATABLE READ snapshot, and land in one transaction.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote

import psycopg

from vault.errors import InvalidArgument, StorageError
from vault.storage.postgres.connections import CONNECT_TIMEOUT, TRANSLATE, present
from vault.storage.postgres.describe import display
from vault.storage.postgres.schema import SCHEMA_VERSION, TABLES, migrate

_COPIED = tuple(table for table in TABLES if table != "scratchvault_schema")  # migrate writes the version


def backup(url: str, target: str) -> None:
    """Copy the vault at ``url`` into ``target`` (a postgresql:// URL naming a schema with no vault tables)."""
    display(url)
    display(target)
    with TRANSLATE, psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT) as source, \
            psycopg.connect(target, connect_timeout=CONNECT_TIMEOUT) as copy:
        source.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        source.read_only = True
        found = present(source.execute("SELECT to_regclass('scratchvault_schema') IS NOT NULL").fetchone())[0]
        versions = [v for (v,) in source.execute("SELECT version FROM scratchvault_schema")] if found else []
        if versions != [SCHEMA_VERSION]:
            raise StorageError("no vault of this scratchvault's schema version at the location to back up")
        if present(copy.execute("SELECT to_regclass('scratchvault_schema') IS NOT NULL").fetchone())[0]:
            raise InvalidArgument("the backup target already holds vault tables; give a schema without them")
        migrate(copy)
        for table in _COPIED:
            with source.cursor().copy(f"COPY {table} TO STDOUT (FORMAT BINARY)") as rows, \
                    copy.cursor().copy(f"COPY {table} FROM STDIN (FORMAT BINARY)") as into:
                for data in rows:
                    into.write(data)
        last, called = present(source.execute("SELECT last_value, is_called FROM row_seq").fetchone())
        copy.execute("SELECT setval('row_seq', %s, %s)", (last, called))


@contextmanager
def side_schema(url: str) -> Iterator[str]:
    """A new, empty schema in the database ``url`` names, given as that URL with its search_path: the demo's backup
    target. Dropped, with everything in it, on exit; making it needs CREATE on the database."""
    name = f"scratchvault_copy_{secrets.token_hex(6)}"
    options = psycopg.conninfo.conninfo_to_dict(url).get("options") or ""
    with TRANSLATE, psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT) as connection:
        connection.execute(f"CREATE SCHEMA {name}")
        try:
            yield f"{url}{'&' if '?' in url else '?'}options={quote(f'{options} -csearch_path={name}'.strip())}"
        finally:
            connection.execute(f"DROP SCHEMA {name} CASCADE")


def stored_bytes(url: str) -> bytes:
    """Every value the vault's tables hold, as the server stores it (the demo's canary scan: what the server, its
    WAL and its backups can show)."""
    parts = []
    with TRANSLATE, psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT) as connection:
        for table in TABLES:
            with connection.cursor().copy(f"COPY {table} TO STDOUT (FORMAT BINARY)") as rows:
                parts += [bytes(data) for data in rows]
    return b"".join(parts)
