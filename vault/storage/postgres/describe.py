"""What ``doctor`` reports of a PostgreSQL location, read over one read-only connection without keys: how the
client reaches the server, what the role may do, the server's durability and copies (remanence), and the vault's
tables. Also the vault id a location holds, for the command line. No part of the URL but the host, port,
database and role is ever shown (the URL may hold a password).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping, Sequence

import psycopg

from keys import EPOCH_WRAPPED_SIZE
from vault.errors import IntegrityError, InvalidArgument, VaultError
from vault.storage.base import Finding
from vault.storage.epoch_report import LIVE, NO_EPOCH, UNSWEPT, epoch_findings
from vault.storage.postgres.citus_report import cluster
from vault.storage.postgres.connections import CONNECT_TIMEOUT, TRANSLATE, present
from vault.storage.postgres.durability import NODE_SETTINGS, durability
from vault.storage.postgres.schema import OUR_TABLES, SCHEMA_VERSION, TABLES, check_foreign_objects
from vault.storage.sql.values import blob

# in the order _role selects them
ROLE_ATTRIBUTES = {"rolsuper": "SUPERUSER", "rolcreaterole": "CREATEROLE", "rolcreatedb": "CREATEDB",
                   "rolbypassrls": "BYPASSRLS", "rolreplication": "REPLICATION"}
# predefined roles that reach past the vault's tables: server files, programs, every table, the WAL's contents
BROAD_ROLES = ("pg_read_server_files", "pg_write_server_files", "pg_execute_server_program", "pg_read_all_data",
               "pg_write_all_data")
NEEDED = ("SELECT", "INSERT", "UPDATE", "DELETE")
EXTRA = ("TRUNCATE", "REFERENCES", "TRIGGER")


def display(url: str) -> str:
    """The URL as doctor and error messages may show it: scheme, role, host, port and database, no password."""
    try:
        parts = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.Error:
        raise InvalidArgument("the PostgreSQL URL cannot be parsed (it is not shown: it may hold a password)") from None
    host, port = str(parts.get("host") or ""), f":{parts['port']}" if parts.get("port") else ""
    who = f"{parts['user']}@" if parts.get("user") else ""
    if host.startswith("/"):  # a socket directory: libpq's URL form puts it in the query
        return f"postgresql://{who}{port}/{parts.get('dbname') or ''}?host={host}"
    return f"postgresql://{who}{host}{port}/{parts.get('dbname') or ''}"


@contextlib.contextmanager
def read_only(url: str) -> Iterator[psycopg.Connection]:
    """A connection whose every transaction is READ ONLY (the server refuses a write), errors translated."""
    display(url)  # an unparsable URL is InvalidArgument before libpq could quote it
    with TRANSLATE:
        connection = psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT)
        try:
            connection.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
            yield connection
        finally:
            connection.close()


def vault_id_at(url: str) -> bytes | None:
    """The vault id in the schema the URL's search_path names, or None when no vault is there."""
    with read_only(url) as connection, TRANSLATE:
        if present(connection.execute("SELECT to_regclass('meta')").fetchone())[0] is None:
            return None
        found = connection.execute("SELECT value FROM meta WHERE name = 'vault_id'").fetchone()
    return None if found is None else blob(found[0])


def describe(url: str, now: float) -> list[Finding]:
    """Findings about the database ``url`` names; a connection that fails is one FAIL line."""
    found = [Finding("", f"database: {display(url)}")]
    try:
        with read_only(url) as connection, TRANSLATE:
            return (found + _transport(connection) + _role(connection) + _settings(connection)
                    + cluster(connection) + _vault(connection, now))
    except VaultError as error:
        return [*found, Finding("FAIL", f"database: {error}")]


def _one(connection: psycopg.Connection, statement: str,
         parameters: Sequence[object] | Mapping[str, object] = ()) -> tuple:
    return present(connection.execute(statement, parameters).fetchone())


def _transport(connection: psycopg.Connection) -> list[Finding]:
    """A local Unix socket, or TCP with TLS whose certificate and host name the client verified (sslmode
    verify-full); anything else lets someone on the path read or change what the vault sends."""
    host = connection.info.host
    if host.startswith("/") or host.startswith("@"):
        return [Finding("ok", f"connection: local Unix socket in {host}")]
    tls = bool(_one(connection, "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")[0])
    mode = next((option.val or b"").decode() for option in connection.pgconn.info if option.keyword == b"sslmode")
    where = f"TCP to {host}:{connection.info.port}"
    if not tls:
        return [Finding("FAIL", f"connection: {where} without TLS: use sslmode=verify-full with sslrootcert, or a "
                                "local Unix socket")]
    if mode != "verify-full":
        return [Finding("FAIL", f"connection: {where} with TLS but sslmode={mode}, which does not check the "
                                "server's certificate and name: use sslmode=verify-full with sslrootcert")]
    return [Finding("ok", f"connection: {where}, TLS with the server's certificate and name verified")]


def _role(connection: psycopg.Connection) -> list[Finding]:
    """The role is no superuser and holds only what the vault needs; says what it holds."""
    name, *flags = _one(connection, "SELECT rolname, rolsuper, rolcreaterole, rolcreatedb, rolbypassrls, "
                                    "rolreplication FROM pg_roles WHERE rolname = current_user")
    held = [ROLE_ATTRIBUTES[attribute] for attribute, on in zip(ROLE_ATTRIBUTES, flags, strict=True) if on]
    broad = [] if flags[0] else [role for role in BROAD_ROLES  # a superuser is a member of every role
                                 if _one(connection, "SELECT pg_has_role(current_user, %s, 'MEMBER')", (role,))[0]]
    if held or broad:
        return [Finding("FAIL", f"role {name}: holds {', '.join(held + broad)}; the vault needs none of it (it can "
                                "read or keep what a delete removes, or change the vault's tables): use a role "
                                "with only the vault's table privileges (README, \"Over PostgreSQL\")")]
    return [Finding("ok", f"role {name}: not a superuser; no CREATEROLE, CREATEDB, BYPASSRLS, REPLICATION, "
                          f"no member of {', '.join(BROAD_ROLES)}"), *_table_privileges(connection, name)]


def _table_privileges(connection: psycopg.Connection, role: str) -> list[Finding]:
    """What the role holds on the vault's tables and schema: what the vault needs, and what more."""
    tables = _one(connection, OUR_TABLES, (list(TABLES),))[0] or []
    if not tables:
        return [Finding("", "no vault tables in this schema yet (the first put makes them; the role then needs "
                            "CREATE on the schema)")]
    rows = connection.execute(
        "SELECT c.relname, pg_get_userbyid(c.relowner) = current_user, "
        "array(SELECT p FROM unnest(%s::text[]) AS p WHERE has_table_privilege(c.oid, p)) "
        "FROM pg_class c WHERE c.oid = ANY(%s) ORDER BY c.relname", (list(NEEDED + EXTRA), tables)).fetchall()
    owned = any(owner for _, owner, _ in rows)
    missing = sorted({f"{p} on {table}" for table, _, have in rows for p in _needed(table) if p not in have})
    extra = sorted({p for _, owner, have in rows if not owner for p in have if p in EXTRA})
    sequence, create, owns_schema = _one(
        connection, "SELECT has_sequence_privilege(to_regclass('row_seq'), 'USAGE'), has_schema_privilege("
                    "current_schema(), 'CREATE'), pg_get_userbyid(nspowner) = current_user FROM pg_namespace "
                    "WHERE nspname = current_schema()")
    data = [have for table, _, have in rows if table != "scratchvault_schema"]
    held = [p for p in NEEDED + EXTRA if all(p in have for have in data)] + (
        ["USAGE on row_seq"] if sequence else []) + (["CREATE on the schema"] if create else [])
    found = [Finding("", f"role {role} holds on the vault's tables: {', '.join(held) or 'nothing'}"
                         + (" (it owns them)" if owned else ""))]
    if missing or not sequence:
        found.append(Finding("FAIL", f"role {role} lacks what the vault needs: "
                                     f"{', '.join(missing + ([] if sequence else ['USAGE on row_seq']))}"))
    more = (["it owns the vault's tables (it could alter them or add triggers)"] if owned else []) + (
        ["it owns the schema (it could drop the tables)"] if owns_schema else []) + extra
    if more:
        found.append(Finding("WARN", f"role {role} holds more than the vault needs: {'; '.join(more)}; let another "
                                     "role own the schema and tables and grant this one USAGE on the schema and "
                                     "row_seq, and SELECT, INSERT, UPDATE, DELETE on the tables (README, \"Over "
                                     "PostgreSQL\")"))
    return found


def _needed(table: str) -> tuple[str, ...]:
    """What the vault does to a table: only reads the schema version (migrations are the tables' owner's)."""
    return ("SELECT",) if table == "scratchvault_schema" else NEEDED


def _settings(connection: psycopg.Connection) -> list[Finding]:
    """Durability and the copies of deleted rows this server keeps elsewhere."""
    return durability(json.loads(_one(connection, NODE_SETTINGS)[0]))


def _vault(connection: psycopg.Connection, now: float) -> list[Finding]:
    """The schema version, vault id, counts, rows per key version, sizes, and objects that are not the vault's."""
    schema, size = _one(connection, "SELECT current_schema(), pg_database_size(current_database())")
    if _one(connection, "SELECT to_regclass('scratchvault_schema')")[0] is None:
        return [Finding("", f"schema {schema}: no vault here yet (the first put makes one); database size "
                            f"{size:,} bytes")]
    versions = [version for (version,) in connection.execute("SELECT version FROM scratchvault_schema")]
    if len(versions) != 1 or versions[0] > SCHEMA_VERSION:
        return [Finding("FAIL", f"schema {schema}: schema version {versions}, this scratchvault reads "
                                f"{SCHEMA_VERSION}")]
    vault_id = _one(connection, "SELECT value FROM meta WHERE name = 'vault_id'")
    rows, total, expired = _one(connection, "SELECT count(*), coalesce(sum(size_bytes), 0), count(*) FILTER "
                                            "(WHERE expires_at <= %s) FROM rows", (now,))
    owners, unswept = _one(connection, "SELECT (SELECT count(*) FROM owners), (SELECT count(*) FROM key_tombstones "
                                       "WHERE NOT swept)")
    by_version: dict[int, int] = dict(
        connection.execute("SELECT key_version, count(*) FROM rows GROUP BY 1 ORDER BY 1").fetchall())
    tables = _one(connection, OUR_TABLES, (list(TABLES),))[0] or []
    ours = _one(connection, "SELECT coalesce(sum(pg_total_relation_size(t)), 0) FROM unnest(%s::oid[]) AS t",
                (tables,))[0]
    found = [Finding("ok", f"schema {schema}, schema version {versions[0]}, vault id "
                           f"{blob(vault_id[0]).hex() if vault_id else None}"),
             Finding("", f"rows {rows:,} ({total:,} bytes), expired awaiting gc {expired:,}, owners {owners:,}, "
                         f"rows by key version {by_version}"),
             Finding("", f"database size {size:,} bytes, the vault's tables {ours:,} bytes")]
    no_epoch = _one(connection, NO_EPOCH.format(length="octet_length", size="%s"), (EPOCH_WRAPPED_SIZE,))[0]
    found += epoch_findings(no_epoch, connection.execute(LIVE).fetchall(),
                            _one(connection, UNSWEPT.format(false="false"))[0], now)
    if unswept:
        found.append(Finding("WARN", f"{unswept:,} destroyed key version(s) whose keyring entries are not yet known "
                                     "deleted (a shred or retirement met a keyring failure): run it again"))
    try:
        check_foreign_objects(connection)
    except IntegrityError as error:
        found.append(Finding("FAIL", f"schema objects scratchvault did not make: {error}"))
    return found
