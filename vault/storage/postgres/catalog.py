"""The PostgreSQL schema as an allowlist: the catalog of the vault's tables must describe exactly what the vault made.

Every catalog relation is named with its schema, ``pg_catalog``: a session's temporary relations come first on its
search path, and one of the vault's pooled sessions may have been made to create some. Each table is described by
its kind and persistence (an UNLOGGED table is emptied by a crash), columns (name, type, NOT NULL, default,
identity, generated), constraints (primary keys; any foreign key or CHECK is another's), indexes (their whole
definition), triggers (internal ones included: a foreign key from or to the table shows as such), rules, row
security and its policies, and inheritance. The one object of another's allowed is the trigger Citus puts on each
table it distributes, known exactly: internal, statement-level on TRUNCATE, enabled, no arguments, named
``truncate_trigger_<its oid>`` and calling ``pg_catalog.citus_truncate_trigger()``, where the extension is
installed (it forwards a TRUNCATE of the table on the coordinator to the shards).
Anything beyond ``EXPECTED`` is refused with IntegrityError when the store opens and before every write that must
stick commits (on the tables it changes: its locks keep them as checked until it ends); doctor reports it
(threat_model.md, "What the database cannot move"). A denylist of object kinds is what a writer walks around.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import psycopg

from vault.errors import IntegrityError

Described = tuple[str, str, str]  # (table, kind of object, its description)

# one line per object on the vault's tables, in the schema ``%(schema)s`` (quoted), the tables ``%(tables)s``
DESCRIBE = """
WITH ours AS (SELECT c.oid, c.relname::text AS name, c.relkind, c.relpersistence, c.relrowsecurity,
                     c.relforcerowsecurity
              FROM pg_catalog.pg_class c JOIN unnest(%(tables)s::text[]) AS t(name) ON c.relname = t.name
              WHERE c.relnamespace = %(schema)s::regnamespace)
SELECT name, 'kind', relkind::text || ' ' || relpersistence::text FROM ours
UNION ALL SELECT name, 'row security', relrowsecurity::text || ' ' || relforcerowsecurity::text FROM ours
    WHERE relrowsecurity OR relforcerowsecurity
UNION ALL SELECT name, 'column', a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
        || CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END
        || coalesce(' DEFAULT ' || pg_get_expr(d.adbin, d.adrelid), '')
        || CASE WHEN a.attidentity <> '' THEN ' IDENTITY ' || a.attidentity::text ELSE '' END
        || CASE WHEN a.attgenerated <> '' THEN ' GENERATED ' || a.attgenerated::text ELSE '' END
        || CASE WHEN a.attcollation <> 0 AND a.attcollation <> (SELECT oid FROM pg_catalog.pg_collation
                WHERE collname = 'default' AND collnamespace = 'pg_catalog'::regnamespace)
           THEN ' COLLATE ' || a.attcollation::regcollation::text ELSE '' END
    FROM ours JOIN pg_catalog.pg_attribute a ON a.attrelid = ours.oid LEFT JOIN pg_catalog.pg_attrdef d
        ON d.adrelid = a.attrelid AND d.adnum = a.attnum
    WHERE a.attnum > 0 AND NOT a.attisdropped
UNION ALL SELECT name, 'constraint', c.conname || ' ' || pg_get_constraintdef(c.oid)
        || CASE WHEN c.condeferrable THEN ' DEFERRABLE' ELSE '' END
    FROM ours JOIN pg_catalog.pg_constraint c ON c.conrelid = ours.oid WHERE c.contype <> 'n'
UNION ALL SELECT name, 'referenced by', c.conname FROM ours JOIN pg_catalog.pg_constraint c ON c.confrelid = ours.oid
UNION ALL SELECT name, 'index', replace(pg_get_indexdef(i.indexrelid), ' ON ' || %(schema)s || '.', ' ON ')
    FROM ours JOIN pg_catalog.pg_index i ON i.indrelid = ours.oid
UNION ALL SELECT name, 'trigger', CASE WHEN t.tgisinternal AND t.tgtype = 32 AND t.tgenabled = 'O' AND t.tgnargs = 0
        AND t.tgname = 'truncate_trigger_' || t.oid::text AND p.proname = 'citus_truncate_trigger'
        AND p.pronamespace = 'pg_catalog'::regnamespace
        AND EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus')
    THEN 'citus truncate trigger' ELSE t.tgname END
    FROM ours JOIN pg_catalog.pg_trigger t ON t.tgrelid = ours.oid JOIN pg_catalog.pg_proc p ON p.oid = t.tgfoid
UNION ALL SELECT name, 'rule', r.rulename FROM ours JOIN pg_catalog.pg_rewrite r ON r.ev_class = ours.oid
UNION ALL SELECT name, 'policy', p.polname FROM ours JOIN pg_catalog.pg_policy p ON p.polrelid = ours.oid
UNION ALL SELECT name, 'inheritance', 'inherits' FROM ours JOIN pg_catalog.pg_inherits h ON h.inhrelid = ours.oid
UNION ALL SELECT name, 'inheritance', 'inherited' FROM ours JOIN pg_catalog.pg_inherits h ON h.inhparent = ours.oid
UNION ALL SELECT name, 'shadowed', 'another relation of its name comes first on the search path' FROM ours
    WHERE to_regclass(quote_ident(name)) IS DISTINCT FROM ours.oid
"""


def _table(name: str, columns: Iterable[str], key: str, indexes: Iterable[str] = ()) -> set[Described]:
    """A table as the vault makes it: ``columns``, a primary key ``<name>_pkey`` on ``key``, and extra indexes
    (and Citus's trigger, once the table is distributed)."""
    found = {(name, "kind", "r p"), (name, "constraint", f"{name}_pkey PRIMARY KEY ({key})"),
             (name, "trigger", "citus truncate trigger"),
             (name, "index", f"CREATE UNIQUE INDEX {name}_pkey ON {name} USING btree ({key})")}
    found |= {(name, "column", column) for column in columns}
    return found | {(name, "index", index) for index in indexes}


_BYTEA, _BIGINT, _INT, _DOUBLE = "bytea NOT NULL", "bigint NOT NULL", "integer NOT NULL", "double precision NOT NULL"
EXPECTED: frozenset[Described] = frozenset(
    {("scratchvault_schema", "kind", "r p"), ("scratchvault_schema", "column", f"version {_INT}"),
     ("scratchvault_schema", "trigger", "citus truncate trigger")}
    | _table("meta", ["name text NOT NULL", f"value {_BYTEA}"], "name")
    | _table("rows", [f"seq {_BIGINT}", f"id {_BYTEA}", f"owner_tag {_BYTEA}", f"turn_tag {_BYTEA}",
                      f"key_version {_INT}", f"expires_at {_DOUBLE}", f"size_bytes {_BIGINT}",
                      f"wrapped_key {_BYTEA}", f"metadata {_BYTEA}", "summary bytea", "chunk bytea"], "owner_tag, seq",
             ["CREATE INDEX rows_owner_turn ON rows USING btree (owner_tag, turn_tag, seq)",
              "CREATE INDEX rows_expiry ON rows USING btree (expires_at)",
              "CREATE INDEX rows_seq ON rows USING btree (seq)",
              "CREATE INDEX rows_owner_usage ON rows USING btree (owner_tag, key_version) INCLUDE (size_bytes)"])
    | _table("summaries", [f"owner_tag {_BYTEA}", f"seq {_BIGINT}", f"sealed {_BYTEA}"], "owner_tag, seq")
    | _table("chunks", [f"owner_tag {_BYTEA}", f"seq {_BIGINT}", f"idx {_INT}", f"sealed {_BYTEA}"],
             "owner_tag, seq, idx")
    | _table("owner_keys", [f"owner_tag {_BYTEA}", f"version {_INT}", f"check_value {_BYTEA}"], "owner_tag, version")
    | _table("owners", [f"owner_tag {_BYTEA}", f"sealed_name {_BYTEA}"], "owner_tag")
    | _table("key_reservations", [f"owner_tag {_BYTEA}", f"version {_INT}", f"reserved_at {_DOUBLE}"],
             "owner_tag, version")
    | _table("key_tombstones", [f"owner_tag {_BYTEA}", f"version {_INT}", f"check_value {_BYTEA}",
                                "swept boolean NOT NULL"], "owner_tag, version")
    | _table("deletions", [f"owner_tag {_BYTEA}", f"counter {_BIGINT}", f"body {_BYTEA}", f"tag {_BYTEA}"],
             "owner_tag")
    | _table("epoch_keys", [f"length {_BIGINT}", f"epoch {_BIGINT}", f"attempt {_BIGINT}", f"check_value {_BYTEA}"],
             "length, epoch")
    | _table("epoch_reservations", [f"length {_BIGINT}", f"epoch {_BIGINT}", f"attempt {_BIGINT}",
                                    f"reserved_at {_DOUBLE}"], "length, epoch, attempt")
    | _table("epoch_tombstones", [f"length {_BIGINT}", f"epoch {_BIGINT}", f"attempt {_BIGINT}",
                                  f"check_value {_BYTEA}", "swept boolean NOT NULL"], "length, epoch, attempt"))


# what a database before schema 4 has in place of the primary keys starting with owner_tag: allowed only until the
# migration replaces them (the catalog is checked again, strictly, once it has)
BEFORE_OWNER_KEYS: frozenset[Described] = frozenset(
    {("rows", "constraint", "rows_pkey PRIMARY KEY (seq)"),
     ("rows", "index", "CREATE UNIQUE INDEX rows_pkey ON rows USING btree (seq)"),
     ("summaries", "constraint", "summaries_pkey PRIMARY KEY (seq)"),
     ("summaries", "index", "CREATE UNIQUE INDEX summaries_pkey ON summaries USING btree (seq)"),
     ("chunks", "constraint", "chunks_pkey PRIMARY KEY (seq, idx)"),
     ("chunks", "index", "CREATE UNIQUE INDEX chunks_pkey ON chunks USING btree (seq, idx)")})


def describe(connection: psycopg.Connection, schema: str, tables: Sequence[str]) -> set[Described]:
    """What the catalog says of ``tables`` in ``schema`` (quoted)."""
    rows = connection.execute(DESCRIBE, {"schema": schema, "tables": list(tables)}).fetchall()
    return {(str(table), str(kind), str(text)) for table, kind, text in rows}


def unexpected(connection: psycopg.Connection, schema: str, tables: Sequence[str],
               expected: frozenset[Described] = EXPECTED) -> list[Described]:
    """What the catalog holds on ``tables`` beyond what the vault made (``expected``), sorted (empty: exactly the
    vault's)."""
    return sorted(describe(connection, schema, tables) - expected)


def missing_columns(connection: psycopg.Connection, schema: str, tables: Sequence[str]) -> list[str]:
    """The columns of ``tables`` the vault made that the catalog no longer has (dropped), as ``table.column``, sorted;
    only after the migration has made every column (before it, a database of an earlier version lacks some)."""
    def names(described: Iterable[Described]) -> set[str]:
        return {f"{table}.{text.split()[0]}" for table, kind, text in described if kind == "column" and table in tables}
    return sorted(names(EXPECTED) - names(describe(connection, schema, tables)))


def check(connection: psycopg.Connection, schema: str, tables: Sequence[str],
          expected: frozenset[Described] = EXPECTED) -> None:
    """IntegrityError unless everything on ``tables`` is what the vault made (``expected``; the message names kinds
    and tables, never a definition's text, which may be anyone's)."""
    found = unexpected(connection, schema, tables, expected)
    if found:
        what = sorted({f"{kind} on {table}" for table, kind, _ in found})
        raise IntegrityError(f"the database holds schema objects scratchvault did not make ({', '.join(what)}): "
                             "they can keep rows a delete removes, copy them, or undo a key's destruction; "
                             "refusing it. Drop them after checking what they did, or restore the database from "
                             "backup")
