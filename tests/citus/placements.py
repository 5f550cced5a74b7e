"""Helpers of the shard allowlist suites: a vault opened on the coordinator by a least-privilege role owning its
schema (so its tables are distributed), where its shards are, and a superuser session on the node holding one,
with Citus's guards off as an attacker would turn them off."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple
from urllib.parse import urlsplit

import psycopg
from psycopg import sql

from keys.testing import MemoryKeyring
from tests.support.citus import CitusCluster, connect, scratch_schema
from vault import Principal, Vault

ALICE = Principal("alice", actor="planner", channel="web")


class DistributedVault(NamedTuple):
    """A vault with rows, its tables distributed: its owner's URL, its schema, its keyring."""

    url: str
    schema: str
    keyring: MemoryKeyring


@contextmanager
def distributed_vault(cluster: CitusCluster, admin: psycopg.Connection) -> Iterator[DistributedVault]:
    """A login role (no superuser, Citus makes it on the workers too) owning a schema of its own, where it opens a
    vault (which distributes the tables) and puts a small and a large row; schema and role dropped afterwards."""
    role, password = "citus_owner_" + secrets.token_hex(4), secrets.token_urlsafe(18)
    admin.execute(sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD {}").format(
        sql.Identifier(role), sql.Literal(password)))
    try:
        with scratch_schema(admin, owner=role) as schema:
            url, ring = cluster.url(user=role, password=password, schema=schema), MemoryKeyring()
            with Vault.open(url, keyring_backend=ring) as vault:
                vault.put(ALICE, "t1", 1, "tool", "s" * 4096)
                vault.put(ALICE, "t1", 2, "tool", "l" * 200_000)
            yield DistributedVault(url, schema, ring)
    finally:
        admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def shard_on_a_worker(admin: psycopg.Connection, cluster: CitusCluster, schema: str, table: str) -> tuple[str, str]:
    """(the shard's table name, the superuser URL of the worker holding it) of one shard of ``table``."""
    found = admin.execute("SELECT s.shardid, n.nodeport FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid) "
                          "JOIN pg_dist_node n ON n.groupid = p.groupid WHERE s.logicalrelid = %s::regclass "
                          "AND p.groupid <> 0 ORDER BY s.shardid LIMIT 1", [f"{schema}.{table}"]).fetchone()
    assert found is not None, f"{table} has a placement on a worker"
    worker = next(url for url in cluster.worker_urls if urlsplit(url).port == found[1])
    return f"{table}_{found[0]}", worker


def shard_on_the_coordinator(admin: psycopg.Connection, schema: str, table: str) -> str:
    """The name of the coordinator's own placement of the reference table ``table``."""
    found = admin.execute("SELECT s.shardid FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid) "
                          "WHERE s.logicalrelid = %s::regclass AND p.groupid = 0", [f"{schema}.{table}"]).fetchone()
    assert found is not None, f"the coordinator holds a placement of {table}"
    return f"{table}_{found[0]}"


@contextmanager
def as_attacker(url: str) -> Iterator[psycopg.Connection]:
    """A superuser session on a node that sees shards and changes them there only (no DDL propagation)."""
    with connect(url) as node:
        node.execute("SET citus.enable_ddl_propagation = off")
        node.execute("SET citus.show_shards_for_app_name_prefixes = '*'")
        yield node
