"""One worker down, the owners of the other go on (threat_model.md, "Citus": "other owners go on"): a read that
finds nothing for its owner is answered by the owner's worker alone, whatever id the caller makes up."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from keys.testing import MemoryKeyring
from tests.support.citus import CitusCluster, connect
from tests.support.citus_nodes import stopped
from vault import NotFound, Principal, Vault

ALICE = Principal("alice")


def _other_workers_data(admin: psycopg.Connection, citus_cluster: CitusCluster, schema_name: str) -> Path:
    """The data directory of the worker that holds no shard of the one owner's rows in ``schema_name``."""
    table = f"{schema_name}.rows"
    port = admin.execute(sql.SQL(
        "SELECT nodeport FROM citus_shards WHERE table_name = %s::regclass AND shardid = "
        "get_shard_id_for_distribution_column(%s, (SELECT owner_tag FROM {} LIMIT 1))").format(
            sql.Identifier(schema_name, "rows")), [table, table]).fetchone()[0]
    directories = os.environ["SCRATCHVAULT_TEST_CITUS_PGDATA"].split()[1:]  # the coordinator's first
    others = [Path(data) for url, data in zip(citus_cluster.worker_urls, directories, strict=True)
              if psycopg.conninfo.conninfo_to_dict(url)["port"] != str(port)]
    assert len(others) == 1
    return others[0]


def test_a_miss_with_another_owners_worker_down_is_still_not_found(citus_cluster: CitusCluster,
                                                                   citus_admin: psycopg.Connection) -> None:
    name = "citus_" + secrets.token_hex(6)
    citus_admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    try:
        with Vault.open(citus_cluster.url(schema=name), keyring_backend=MemoryKeyring()) as vault:
            kept = vault.put(ALICE, "t", 1, "x", "alice's").id
            with stopped(Path(os.environ["SCRATCHVAULT_TEST_CITUS_PGCTL"]),
                         _other_workers_data(citus_admin, citus_cluster, name)):
                assert vault.get(ALICE, kept).content == "alice's"  # her worker answers
                with pytest.raises(NotFound):
                    vault.get(ALICE, secrets.token_hex(16))  # a made-up id: her worker alone can say it is not hers
    finally:  # a session of its own: those from before the restart hold connections to the worker that went
        with connect(citus_cluster.coordinator_url) as admin:
            admin.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))
