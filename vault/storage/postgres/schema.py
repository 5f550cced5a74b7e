"""The PostgreSQL schema: tables fitted to the server (not the SQLite file's translated), its version in a table,
migrations under an advisory lock, and the checks that refuse a schema someone else changed.

Chunks are keyed by ``PRIMARY KEY (seq, idx)``: PostgreSQL tables are heaps, not ordered by key, so the SQLite
store's ``seq << 20 | idx`` packing buys nothing here. Every bytea column is ``STORAGE EXTERNAL``: ciphertext does
not compress, so trying costs time for nothing. Row seqs come from a sequence and are never reused.
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from vault.errors import IntegrityError, StorageError

# of the PostgreSQL schema; independent of the SQLite file's. 2: the keys of expiry epochs (epoch_keys,
# epoch_reservations, epoch_tombstones; threat_model.md, "Expiry epochs"), added to a database of version 1
SCHEMA_VERSION = 2
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
    seq bigint PRIMARY KEY,
    id bytea NOT NULL,
    owner_tag bytea NOT NULL,
    turn_tag bytea NOT NULL,
    key_version integer NOT NULL,
    expires_at double precision NOT NULL,
    size_bytes bigint NOT NULL,
    wrapped_key bytea NOT NULL,
    metadata bytea NOT NULL
);
CREATE INDEX IF NOT EXISTS rows_owner_turn ON rows (owner_tag, turn_tag, seq);
CREATE INDEX IF NOT EXISTS rows_expiry ON rows (expires_at);
CREATE INDEX IF NOT EXISTS rows_owner_usage ON rows (owner_tag, key_version) INCLUDE (size_bytes);
CREATE TABLE IF NOT EXISTS summaries (seq bigint PRIMARY KEY, sealed bytea NOT NULL);
CREATE TABLE IF NOT EXISTS chunks (seq bigint NOT NULL, idx integer NOT NULL, sealed bytea NOT NULL,
                                   PRIMARY KEY (seq, idx));
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
    ALTER COLUMN metadata SET STORAGE EXTERNAL;
ALTER TABLE summaries ALTER COLUMN sealed SET STORAGE EXTERNAL;
ALTER TABLE chunks ALTER COLUMN sealed SET STORAGE EXTERNAL;
ALTER TABLE deletions ALTER COLUMN body SET STORAGE EXTERNAL
"""
# where the vault's tables live: the schema holding its version table, else the one its DDL would create them in
HOME = ("SELECT coalesce((SELECT relnamespace::regnamespace::text FROM pg_class "
        "WHERE oid = to_regclass('scratchvault_schema')), quote_ident(current_schema()))")
# what can keep or copy a row a delete removes, or take the place of one of the vault's tables: a trigger, rule or
# row security on one, a view or other relation instead of one, or another relation of its name that the session
# finds first (its temporary schema, or a schema earlier on its search_path)
FOREIGN_OBJECTS = """
WITH ours AS (SELECT to_regclass(name) AS found, to_regclass(%(home)s || '.' || quote_ident(name)) AS table_oid
              FROM unnest(%(tables)s::text[]) AS name)
SELECT 'trigger' FROM pg_trigger t JOIN ours ON t.tgrelid = ours.table_oid WHERE NOT t.tgisinternal
UNION ALL SELECT 'rule' FROM pg_rewrite r JOIN ours ON r.ev_class = ours.table_oid WHERE r.rulename <> '_RETURN'
UNION ALL SELECT 'row security policy' FROM pg_policy p JOIN ours ON p.polrelid = ours.table_oid
UNION ALL SELECT CASE WHEN c.relkind <> 'r' THEN 'view or other relation in place of a table'
                      ELSE 'row level security' END
    FROM pg_class c JOIN ours ON c.oid = ours.table_oid WHERE c.relkind <> 'r' OR c.relrowsecurity
UNION ALL SELECT 'relation of the same name found first on the search path' FROM ours
    WHERE found IS DISTINCT FROM table_oid
"""
# whether a table of the vault is missing (dropped behind its back; one no call uses yet would go unnoticed)
MISSING = ("SELECT count(*) FROM unnest(%(tables)s::text[]) AS name "
           "WHERE to_regclass(%(home)s || '.' || quote_ident(name)) IS NULL")
OUR_TABLES = ("SELECT array_agg(to_regclass(name)::oid) FILTER (WHERE to_regclass(name) IS NOT NULL) "
              "FROM unnest(%s::text[]) AS name")


def migrate(connection: psycopg.Connection) -> str:
    """Create missing tables and record the schema version, under an advisory lock (PostgreSQL DDL is
    transactional: two hosts opening one new database make it once); returns the schema the tables are in (quoted).
    A database of a newer scratchvault, or one whose tables carry a trigger, rule or policy, is refused."""
    connection.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_CLASS, MIGRATE_LOCK))
    home = connection.execute(HOME).fetchone()[0]
    found = None
    if connection.execute("SELECT to_regclass('scratchvault_schema')").fetchone()[0] is not None:
        versions = [version for (version,) in connection.execute("SELECT version FROM scratchvault_schema")]
        if len(versions) > 1 or (versions and type(versions[0]) is not int):
            raise IntegrityError("the PostgreSQL schema version table was altered; restore it from backup")
        found = versions[0] if versions else None
    if found is not None and found > SCHEMA_VERSION:
        raise StorageError("the database was written by a newer scratchvault; upgrade to open it")
    check_foreign_objects(connection, home)
    if found != SCHEMA_VERSION:
        connection.execute(DDL)
        connection.execute("DELETE FROM scratchvault_schema")
        connection.execute("INSERT INTO scratchvault_schema (version) VALUES (%s)", (SCHEMA_VERSION,))
    if connection.execute(MISSING, {"home": home, "tables": list(TABLES)}).fetchone()[0]:
        raise StorageError("a table of the vault is missing from the database (dropped?); restore it from "
                           "backup") from None
    return home


def check_foreign_objects(connection: psycopg.Connection, home: str | None = None,
                          tables: Sequence[str] = TABLES) -> None:
    """IntegrityError when a trigger, rule or row security sits on one of the vault's tables (in ``home``, the
    quoted schema; None: where they are found), or another relation takes the place of one: it could keep or copy
    the rows a delete removes (the role that owns the tables, or a superuser, put it there). ``tables``: which of
    them (all, when the store opens; a write's own, before it commits). Run when the store
    opens, and before a write that must stick (a delete, a ledger, a key's destruction) commits: by then no
    trigger, rule or policy can be added to or dropped from a table it wrote until it ends."""
    home = home or connection.execute(HOME).fetchone()[0]
    foreign = sorted({kind for (kind,) in connection.execute(FOREIGN_OBJECTS, {"home": home, "tables": list(tables)})})
    if foreign:
        raise IntegrityError(f"the database holds schema objects scratchvault did not make ({', '.join(foreign)}) "
                             "on its tables: they can keep rows a delete removes, or copy them; refusing it. Drop "
                             "them after checking what they did, or restore the database from backup")
