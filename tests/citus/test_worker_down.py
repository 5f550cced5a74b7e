"""One worker down, the owners of the other go on (threat_model.md, "Citus": "other owners go on"): a read that
finds nothing for its owner is answered by the owner's worker alone, whatever id the caller makes up."""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from keys.testing import MemoryKeyring
from tests.support.citus import CitusCluster, connect
from vault import NotFound, Principal, Vault

ALICE = Principal("alice")


@contextlib.contextmanager
def worker_stopped(data: Path) -> Iterator[None]:
    """The worker whose data directory is ``data`` stopped (fast shutdown) on entry and started again on exit."""
    pg_ctl = os.environ["SCRATCHVAULT_TEST_CITUS_PGCTL"]
    as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    subprocess.run([*as_postgres, pg_ctl, "-D", str(data), "-m", "fast", "-w", "stop"], check=True,
                   stdout=subprocess.DEVNULL)
    try:
        yield
    finally:
        subprocess.run([*as_postgres, pg_ctl, "-D", str(data), "-w", "-t", "60", "-l", str(data / "restart.log"),
                        "start"], check=True, stdout=subprocess.DEVNULL)


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
            with worker_stopped(_other_workers_data(citus_admin, citus_cluster, name)):
                assert vault.get(ALICE, kept).content == "alice's"  # her worker answers
                with pytest.raises(NotFound):
                    vault.get(ALICE, secrets.token_hex(16))  # a made-up id: her worker alone can say it is not hers
    finally:  # a session of its own: those from before the restart hold connections to the worker that went
        with connect(citus_cluster.coordinator_url) as admin:
            admin.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))
