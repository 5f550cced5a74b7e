"""Where Citus puts a table's rows: a table distributed by an owner-like key has shards on both workers, and two
distribution values land on different workers, as Citus's catalog says and as each worker's own shard tables show."""

from __future__ import annotations

import hashlib
from urllib.parse import urlsplit

import psycopg
from psycopg import sql

from tests.support.citus import CitusCluster, connect


def _port(url: str) -> int:
    port = urlsplit(url).port
    assert port is not None, "the harness gives every node a TCP port"
    return port


def _distributed_table(admin: psycopg.Connection, schema: str) -> str:
    """A table keyed like the vault's owner records (a bytea blind index), distributed by it; its qualified name."""
    table = f"{schema}.by_owner"
    admin.execute(sql.SQL("CREATE TABLE {} (owner_tag bytea PRIMARY KEY, body bytea NOT NULL)").format(
        sql.Identifier(schema, "by_owner")))
    admin.execute("SELECT create_distributed_table(%s, 'owner_tag')", [table])
    return table


def _worker_port_of(admin: psycopg.Connection, table: str, tag: bytes) -> tuple[int, int]:
    """(shard id, worker port) of the shard holding ``tag``, by Citus's catalog."""
    found = admin.execute("SELECT shardid, nodeport FROM citus_shards WHERE shardid = "
                          "get_shard_id_for_distribution_column(%s, %s)", [table, tag]).fetchone()
    assert found is not None, "every distribution value has a shard with a placement"
    return int(found[0]), int(found[1])


def test_a_table_distributed_by_owner_has_shards_on_both_workers(citus_cluster: CitusCluster,
                                                                  citus_admin: psycopg.Connection,
                                                                  citus_schema: str) -> None:
    table = _distributed_table(citus_admin, citus_schema)
    ports = {int(port) for (port,) in citus_admin.execute(
        "SELECT DISTINCT nodeport FROM citus_shards WHERE table_name = %s::regclass", [table])}
    assert ports == {_port(url) for url in citus_cluster.worker_urls}


def test_two_owners_rows_land_on_different_workers(citus_cluster: CitusCluster, citus_admin: psycopg.Connection,
                                                   citus_schema: str) -> None:
    table = _distributed_table(citus_admin, citus_schema)
    placed: dict[int, tuple[bytes, int]] = {}  # worker port -> (an owner tag it holds, that tag's shard)
    for number in range(64):
        tag = hashlib.sha256(number.to_bytes(2, "big")).digest()
        shard, port = _worker_port_of(citus_admin, table, tag)
        placed.setdefault(port, (tag, shard))
    assert len(placed) == 2, f"64 owner tags all hashed to the shards of one worker: {placed}"
    for tag, _ in placed.values():
        citus_admin.execute(sql.SQL("INSERT INTO {} VALUES (%s, %s)").format(
            sql.Identifier(citus_schema, "by_owner")), [tag, b"sealed"])
    for url in citus_cluster.worker_urls:
        with connect(url) as worker:
            for port, (tag, shard) in placed.items():
                shard_table = f"{citus_schema}.by_owner_{shard}"
                if port == _port(url):
                    held = worker.execute(sql.SQL("SELECT count(*) FROM {} WHERE owner_tag = %s").format(
                        sql.Identifier(citus_schema, f"by_owner_{shard}")), [tag]).fetchone()
                    assert held == (1,), "the row is in the shard table Citus names, on the worker it names"
                else:
                    assert worker.execute("SELECT to_regclass(%s)", [shard_table]).fetchone() == (None,), \
                        "the other owner's shard is not on this worker"
