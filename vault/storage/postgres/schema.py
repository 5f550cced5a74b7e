"""The PostgreSQL schema: tables fitted to the server (not the SQLite file's translated), its version in a table,
migrations under an advisory lock, and the checks that refuse a schema someone else changed.

A row's sealed summary, and the only chunk of a row of one chunk, are kept in its ``rows`` tuple (``summary``,
``chunk``): a small row is one tuple, kept in its heap page up to ``toast_tuple_target`` (8160 bytes) rather than
moved to the TOAST table. Chunks of larger rows are keyed by ``PRIMARY KEY (seq, idx)``: PostgreSQL tables are
heaps, not ordered by key, so the SQLite store's ``seq << 20 | idx`` packing buys nothing here. Rows written before
schema 3 keep their summary in ``summaries`` and every chunk in ``chunks`` (their ``summary`` and ``chunk`` are
NULL) until a rewrap or extend writes their summary again, into the row. Every bytea column is ``STORAGE
EXTERNAL``: ciphertext does not compress, so trying costs time for nothing. Row seqs come from a sequence and are
never reused.
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg
from psycopg import sql

from vault.errors import IntegrityError, StorageError
from vault.storage.postgres import catalog, citus
from vault.storage.postgres.connections import present

# of the PostgreSQL schema; independent of the SQLite file's. 2: the keys of expiry epochs (epoch_keys,
# epoch_reservations, epoch_tombstones; threat_model.md, "Expiry epochs"), added to a database of version 1. 3: a
# row's summary and only chunk in its rows tuple (the columns summary and chunk, added to a database of version 2,
# whose rows keep theirs where they were; the release before would not see them and must refuse it). 4: every table
# of an owner's records keyed by owner_tag first (rows, and chunks and summaries given the column), so Citus can
# shard them by owner (citus.py); a database of version 3 has the column filled from the rows
SCHEMA_VERSION = 4
LOCK_CLASS = 0x5356  # "SV": the first key of every advisory lock the store takes (the second says which)
MIGRATE_LOCK = 1
KEYS_LOCK = 2  # key creation and rotation (rare; a keyring write is made under it)
META_LOCK = 3  # a new vault's id and index key
OWNER_LOCK_CLASS = 0x5357  # per owner: (OWNER_LOCK_CLASS, first 4 bytes of the owner tag as int4)
TABLES = ("scratchvault_schema", "meta", "rows", "summaries", "chunks", "owner_keys", "owners", "key_reservations",
          "key_tombstones", "deletions", "epoch_keys", "epoch_reservations", "epoch_tombstones")
DDL = """
CREATE TABLE IF NOT EXISTS scratchvault_schema (version integer NOT NULL);
CREATE TABLE IF NOT EXISTS meta (name text PRIMARY KEY, value bytea NOT NULL);
CREATE SEQUENCE IF NOT EXISTS row_seq AS bigint MINVALUE 1 NO CYCLE;
CREATE TABLE IF NOT EXISTS rows (
    seq bigint NOT NULL,
    id bytea NOT NULL,
    owner_tag bytea NOT NULL,
    turn_tag bytea NOT NULL,
    key_version integer NOT NULL,
    expires_at double precision NOT NULL,
    size_bytes bigint NOT NULL,
    wrapped_key bytea NOT NULL,
    metadata bytea NOT NULL,
    summary bytea,
    chunk bytea,
    PRIMARY KEY (owner_tag, seq)
) WITH (toast_tuple_target = 8160);
ALTER TABLE rows ADD COLUMN IF NOT EXISTS summary bytea, ADD COLUMN IF NOT EXISTS chunk bytea;
ALTER TABLE rows SET (toast_tuple_target = 8160);
CREATE INDEX IF NOT EXISTS rows_owner_turn ON rows (owner_tag, turn_tag, seq);
CREATE INDEX IF NOT EXISTS rows_expiry ON rows (expires_at);
CREATE INDEX IF NOT EXISTS rows_seq ON rows (seq);
CREATE INDEX IF NOT EXISTS rows_owner_usage ON rows (owner_tag, key_version) INCLUDE (size_bytes);
CREATE TABLE IF NOT EXISTS summaries (owner_tag bytea NOT NULL, seq bigint NOT NULL, sealed bytea NOT NULL,
                                      PRIMARY KEY (owner_tag, seq));
CREATE TABLE IF NOT EXISTS chunks (owner_tag bytea NOT NULL, seq bigint NOT NULL, idx integer NOT NULL,
                                   sealed bytea NOT NULL, PRIMARY KEY (owner_tag, seq, idx));
ALTER TABLE summaries ADD COLUMN IF NOT EXISTS owner_tag bytea;
ALTER TABLE chunks ADD COLUMN IF NOT EXISTS owner_tag bytea;
UPDATE summaries SET owner_tag = rows.owner_tag FROM rows
    WHERE summaries.owner_tag IS NULL AND rows.seq = summaries.seq;
UPDATE chunks SET owner_tag = rows.owner_tag FROM rows WHERE chunks.owner_tag IS NULL AND rows.seq = chunks.seq;
DELETE FROM summaries WHERE owner_tag IS NULL;
DELETE FROM chunks WHERE owner_tag IS NULL;
ALTER TABLE summaries ALTER COLUMN owner_tag SET NOT NULL;
ALTER TABLE chunks ALTER COLUMN owner_tag SET NOT NULL;
CREATE TABLE IF NOT EXISTS owner_keys (owner_tag bytea NOT NULL, version integer NOT NULL,
                                       check_value bytea NOT NULL, PRIMARY KEY (owner_tag, version));
CREATE TABLE IF NOT EXISTS owners (owner_tag bytea PRIMARY KEY, sealed_name bytea NOT NULL);
CREATE TABLE IF NOT EXISTS key_reservations (owner_tag bytea NOT NULL, version integer NOT NULL,
                                             reserved_at double precision NOT NULL, PRIMARY KEY (owner_tag, version));
CREATE TABLE IF NOT EXISTS key_tombstones (owner_tag bytea NOT NULL, version integer NOT NULL,
                                           check_value bytea NOT NULL, swept boolean NOT NULL,
                                           PRIMARY KEY (owner_tag, version));
CREATE TABLE IF NOT EXISTS deletions (owner_tag bytea PRIMARY KEY, counter bigint NOT NULL, body bytea NOT NULL,
                                      tag bytea NOT NULL);
CREATE TABLE IF NOT EXISTS epoch_keys (length bigint NOT NULL, epoch bigint NOT NULL, attempt bigint NOT NULL,
                                       check_value bytea NOT NULL, PRIMARY KEY (length, epoch));
CREATE TABLE IF NOT EXISTS epoch_reservations (length bigint NOT NULL, epoch bigint NOT NULL, attempt bigint NOT NULL,
                                               reserved_at double precision NOT NULL,
                                               PRIMARY KEY (length, epoch, attempt));
CREATE TABLE IF NOT EXISTS epoch_tombstones (length bigint NOT NULL, epoch bigint NOT NULL, attempt bigint NOT NULL,
                                             check_value bytea NOT NULL, swept boolean NOT NULL,
                                             PRIMARY KEY (length, epoch, attempt));
ALTER TABLE rows ALTER COLUMN id SET STORAGE EXTERNAL, ALTER COLUMN wrapped_key SET STORAGE EXTERNAL,
    ALTER COLUMN metadata SET STORAGE EXTERNAL, ALTER COLUMN summary SET STORAGE EXTERNAL,
    ALTER COLUMN chunk SET STORAGE EXTERNAL;
ALTER TABLE summaries ALTER COLUMN sealed SET STORAGE EXTERNAL;
ALTER TABLE chunks ALTER COLUMN sealed SET STORAGE EXTERNAL;
ALTER TABLE deletions ALTER COLUMN body SET STORAGE EXTERNAL
"""
# the primary keys of schema 4, given to the tables a database of an earlier version has keyed by seq
PRIMARY_KEYS = {"rows": ("owner_tag", "seq"), "summaries": ("owner_tag", "seq"), "chunks": ("owner_tag", "seq", "idx")}
PRIMARY_KEY_OF = ("SELECT pg_get_constraintdef(oid) FROM pg_catalog.pg_constraint "
                  "WHERE conrelid = to_regclass(%s) AND contype = 'p'")
# where the vault's tables live: the schema holding its version table, else the one its DDL would create them in
TABLES_SCHEMA = ("SELECT coalesce((SELECT relnamespace::regnamespace::text FROM pg_catalog.pg_class "
                 "WHERE oid = to_regclass('scratchvault_schema')), quote_ident(current_schema()))")
# whether a table of the vault is missing (dropped behind its back; one no call uses yet would go unnoticed)
MISSING = ("SELECT count(*) FROM unnest(%(tables)s::text[]) AS name "
           "WHERE to_regclass(%(schema)s || '.' || quote_ident(name)) IS NULL")
OUR_TABLES = ("SELECT array_agg(to_regclass(name)::oid) FILTER (WHERE to_regclass(name) IS NOT NULL) "
              "FROM unnest(%s::text[]) AS name")


def migrate(connection: psycopg.Connection) -> str:
    """Create missing tables and record the schema version, under an advisory lock (PostgreSQL DDL is
    transactional: two hosts opening one new database make it once); returns the schema the tables are in (quoted).
    A database of a newer scratchvault, or one whose tables carry a trigger, rule or policy, is refused."""
    connection.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_CLASS, MIGRATE_LOCK))
    schema = present(connection.execute(TABLES_SCHEMA).fetchone())[0]
    found = None
    if present(connection.execute("SELECT to_regclass('scratchvault_schema')").fetchone())[0] is not None:
        versions = [version for (version,) in connection.execute("SELECT version FROM scratchvault_schema")]
        if len(versions) > 1 or (versions and type(versions[0]) is not int):
            raise IntegrityError("the PostgreSQL schema version table was altered; restore it from backup")
        found = versions[0] if versions else None
    if found is not None and found > SCHEMA_VERSION:
        raise StorageError("the database was written by a newer scratchvault; upgrade to open it")
    if found != SCHEMA_VERSION:  # what an earlier version had is allowed until the migration replaces it
        catalog.check(connection, schema, TABLES, catalog.EXPECTED | catalog.BEFORE_OWNER_KEYS)
        connection.execute(DDL)
        _key_by_owner(connection, schema)
        connection.execute("DELETE FROM scratchvault_schema")
        connection.execute("INSERT INTO scratchvault_schema (version) VALUES (%s)", (SCHEMA_VERSION,))
    check_foreign_objects(connection, schema)
    if present(connection.execute(MISSING, {"schema": schema, "tables": list(TABLES)}).fetchone())[0]:
        raise StorageError("a table of the vault is missing from the database (dropped?); restore it from "
                           "backup") from None
    if catalog.missing_columns(connection, schema, TABLES):  # its data gone with it: every read would fail
        raise StorageError("a column of the vault's tables is missing from the database (dropped?); restore it from "
                           "backup") from None
    if citus.has_citus(connection):
        citus.distribute(connection, schema)
    return schema


def _key_by_owner(connection: psycopg.Connection, schema: str) -> None:
    """Give the tables a database before schema 4 keyed by seq alone their primary key starting with owner_tag
    (the rows' seqs stay unique: a sequence makes them)."""
    for table, columns in PRIMARY_KEYS.items():
        key = f"PRIMARY KEY ({', '.join(columns)})"
        if present(connection.execute(PRIMARY_KEY_OF, (f"{schema}.{table}",)).fetchone())[0] == key:
            continue
        connection.execute(sql.SQL("ALTER TABLE {table} DROP CONSTRAINT {name}, ADD CONSTRAINT {name} PRIMARY KEY "
                                   "({columns})").format(table=sql.Identifier(table),
                                                         name=sql.Identifier(f"{table}_pkey"),
                                                         columns=sql.SQL(", ").join(map(sql.Identifier, columns))))


def check_foreign_objects(connection: psycopg.Connection, schema: str | None = None,
                          tables: Sequence[str] = TABLES) -> None:
    """IntegrityError unless the catalog of the vault's ``tables`` (all, when the store opens; a write's own, before
    it commits) in ``schema`` (the quoted schema; None: where they are found) is exactly what the vault made
    (vault/storage/postgres/catalog.py): a trigger, rule, policy, constraint, index or relation of someone else's
    could keep or copy the rows a delete removes, or undo a key's destruction (the role that owns the tables, or a
    superuser, put it there). Before a write commits, its locks keep its tables as checked until it ends."""
    catalog.check(connection, schema or present(connection.execute(TABLES_SCHEMA).fetchone())[0], tables)
