"""Where Citus put a vault's records, asked of Citus itself: which of the vault's tables are distributed and how
(``pg_dist_partition``), the shard and the worker holding an owner's rows (``get_shard_id_for_distribution_column``
and ``citus_shards``), and what a worker's own shard table of that owner holds.

An owner is known here by the tag the vault stores for it, read from the ``rows`` table after the owner's first
put: the tests never compute a tag themselves."""

from __future__ import annotations

from typing import NamedTuple

import psycopg
from psycopg import sql

from tests.support.citus_nodes import port_of

# the tables of one owner's records, each distributed by owner_tag in one co-location group (the ledger of deleted
# rows is ``deletions``); named here, not imported from the store, so a table the store forgets to distribute fails
OWNER_TABLES = ("rows", "chunks", "summaries", "owner_keys", "deletions", "owners", "key_reservations",
                "key_tombstones")


class Placement(NamedTuple):
    """The shard of a table holding one distribution value, and the port of the worker holding that shard."""

    shard: int
    port: int


def distributions(admin: psycopg.Connection, schema: str) -> dict[str, tuple[str, str | None, int]]:
    """Each distributed or reference table of ``schema``: (partition method, distribution column, co-location)."""
    found = admin.execute(
        "SELECT c.relname, p.partmethod, column_to_column_name(p.logicalrelid, p.partkey), p.colocationid "
        "FROM pg_dist_partition p JOIN pg_class c ON c.oid = p.logicalrelid WHERE c.relnamespace = %s::regnamespace",
        [schema]).fetchall()
    return {str(table): (str(method), column, int(group)) for table, method, column, group in found}


def require_owner_tables_distributed(admin: psycopg.Connection, schema: str) -> None:
    """Every owner table hash-distributed by ``owner_tag``, all in one co-location group."""
    found = distributions(admin, schema)
    by_owner = {table: found.get(table) for table in OWNER_TABLES}
    assert all(each is not None and each[:2] == ("h", "owner_tag") for each in by_owner.values()), \
        f"not every owner table is hash-distributed by owner_tag: {by_owner}"
    assert len({each[2] for each in by_owner.values() if each is not None}) == 1, \
        f"the owner tables are not co-located: {by_owner}"


def stored_owner_tags(admin: psycopg.Connection, schema: str) -> set[bytes]:
    """The owner tags of every row the vault of ``schema`` holds now."""
    query = sql.SQL("SELECT DISTINCT owner_tag FROM {}").format(sql.Identifier(schema, "rows"))
    return {bytes(tag) for (tag,) in admin.execute(query)}


def new_owner_tag(admin: psycopg.Connection, schema: str, known: set[bytes]) -> bytes:
    """The one owner tag in ``rows`` not in ``known`` (the owner that just made its first put), added to it."""
    new = stored_owner_tags(admin, schema) - known
    assert len(new) == 1, f"expected one new owner in rows, found {len(new)}"
    tag = new.pop()
    known.add(tag)
    return tag


def placement(admin: psycopg.Connection, schema: str, table: str, tag: bytes) -> Placement:
    """Where Citus keeps ``tag``'s rows of ``schema.table``, by its catalog."""
    found = admin.execute("SELECT shardid, nodeport FROM citus_shards WHERE shardid = "
                          "get_shard_id_for_distribution_column(%s, %s)", [f"{schema}.{table}", tag]).fetchone()
    assert found is not None, f"no placement of {table}'s shard for an owner"
    return Placement(int(found[0]), int(found[1]))


def held_on(worker: psycopg.Connection, schema: str, table: str, shard: int, tag: bytes) -> int | None:
    """How many of ``tag``'s rows the worker's shard table ``table_<shard>`` holds; None when it has no such
    table (the shard is placed elsewhere)."""
    shard_table = f"{table}_{shard}"
    exists = worker.execute("SELECT to_regclass(%s)", [f"{schema}.{shard_table}"]).fetchone()
    if exists is None or exists[0] is None:
        return None
    counted = worker.execute(sql.SQL("SELECT count(*) FROM {} WHERE owner_tag = %s").format(
        sql.Identifier(schema, shard_table)), [tag]).fetchone()
    assert counted is not None
    return int(counted[0])


def worker_url(worker_urls: tuple[str, ...], port: int) -> str:
    """The worker of ``worker_urls`` listening on ``port``."""
    return next(url for url in worker_urls if port_of(url) == port)
