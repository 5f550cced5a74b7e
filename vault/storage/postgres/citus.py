"""The vault's tables on a Citus coordinator: an owner's records sharded by its blind index, the rest everywhere.

Where the database has the ``citus`` extension, the migration (under its advisory lock) makes every table of an
owner's records a distributed table, hashed on ``owner_tag`` and co-located, so one owner's row, chunks, summary,
key records and ledger live in shards of one worker and every statement naming the owner is routed to that worker;
and the tables every owner shares a reference table (a copy on every node). Distributing a table that already holds
rows (a vault moved from one PostgreSQL) copies them to the shards; the coordinator's local copy is then truncated,
so no row a later delete removes stays behind on the coordinator. Without the extension nothing here runs.
"""

from __future__ import annotations

import psycopg

from vault.storage.postgres.connections import present

# an owner's records, distributed by owner_tag; the first is the one the others are co-located with
OWNER_TABLES = ("owners", "rows", "chunks", "summaries", "owner_keys", "key_reservations", "key_tombstones",
                "deletions")
SHARED_TABLES = ("scratchvault_schema", "meta", "epoch_keys", "epoch_reservations", "epoch_tombstones")
DISTRIBUTION_COLUMN = "owner_tag"
HAS_CITUS = "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus')"
# the vault's tables Citus already knows: (name, 'h' hash-distributed or 'n' reference)
PLACED = ("SELECT c.relname::text, p.partmethod::text FROM pg_dist_partition p "
          "JOIN pg_catalog.pg_class c ON c.oid = p.logicalrelid "
          "WHERE c.relnamespace = %(schema)s::regnamespace AND c.relname = ANY(%(tables)s::text[])")


def has_citus(connection: psycopg.Connection) -> bool:
    """Whether the database has the Citus extension (then the vault's tables are Citus tables)."""
    return bool(present(connection.execute(HAS_CITUS).fetchone())[0])


def distribute(connection: psycopg.Connection, schema: str) -> None:
    """Make each of the vault's tables in ``schema`` (quoted) that Citus does not know yet a distributed or
    reference table, as the module says, truncating the coordinator's local copy of the rows it moved."""
    placed: dict[str, str] = dict(
        connection.execute(PLACED, {"schema": schema, "tables": [*OWNER_TABLES, *SHARED_TABLES]}).fetchall())
    colocated_with = f"{schema}.{OWNER_TABLES[0]}"
    for table in OWNER_TABLES:
        if table not in placed:
            connection.execute("SELECT create_distributed_table(%s, %s, colocate_with => %s)",
                               (f"{schema}.{table}", DISTRIBUTION_COLUMN,
                                "none" if table == OWNER_TABLES[0] else colocated_with))
            _truncate_local_copy(connection, f"{schema}.{table}")
    for table in SHARED_TABLES:
        if table not in placed:
            connection.execute("SELECT create_reference_table(%s)", (f"{schema}.{table}",))
            _truncate_local_copy(connection, f"{schema}.{table}")


def _truncate_local_copy(connection: psycopg.Connection, table: str) -> None:
    """Remove what distributing ``table`` left in the coordinator's own heap (its rows are in the shards now)."""
    connection.execute("SELECT truncate_local_data_after_distributing_table(%s)", (table,))
