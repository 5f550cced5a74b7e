"""``scratchvault doctor`` on a Citus coordinator: Citus's version, the active workers, each worker's durability
settings and WAL copies, the vault's tables' distribution and placements, and the shards' allowlist; a planted
shard object, a worker that does not wait for its WAL or writes no full pages fails it (vault/storage/postgres/
citus_report.py)."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
from psycopg import sql

from tests.citus.placements import DistributedVault, as_attacker, distributed_vault, shard_on_a_worker
from tests.ops.test_cli import Cli
from tests.support.citus import CitusCluster, connect

PGDATA_ENV = "SCRATCHVAULT_TEST_CITUS_PGDATA"  # the nodes' data dirs, in the dir that holds their sockets


@pytest.fixture
def vault_on_citus(citus_cluster: CitusCluster, citus_admin: psycopg.Connection) -> Iterator[DistributedVault]:
    with distributed_vault(citus_cluster, citus_admin) as made:
        yield made


def _doctor(tmp_path: Path, made: DistributedVault) -> tuple[int, str]:
    """doctor's exit code and report of the vault, reached through the coordinator's Unix socket (over TCP without
    TLS doctor fails the connection whatever else it finds)."""
    data_dirs = os.environ.get(PGDATA_ENV, "").split()
    if not data_dirs:
        pytest.skip(f"{PGDATA_ENV} is not set (scripts/citus.sh sets it)")
    result = Cli(tmp_path, f"{made.url}&host={Path(data_dirs[0]).parent}").run("doctor")
    return result.returncode, result.stdout.decode()


def _worker(url: str) -> str:
    return f"127.0.0.1:{urlsplit(url).port}"


def test_doctor_reports_the_cluster_of_a_vault_left_alone(tmp_path: Path, citus_cluster: CitusCluster,
                                                          vault_on_citus: DistributedVault) -> None:
    code, out = _doctor(tmp_path, vault_on_citus)
    workers = sorted(_worker(url) for url in citus_cluster.worker_urls)
    assert code == 0, out
    assert "ok    connection: local Unix socket" in out
    assert re.search(rf"^ {{6}}Citus \d+\.\d+\.\d+; active workers: {', '.join(workers)}$", out, re.MULTILINE), out
    for worker in workers:
        assert f"ok    worker {worker}: fsync on; synchronous_commit on; full_page_writes on; archive_mode off" in out
    assert re.search(r"distribution: hash by owner_tag in colocation group \d+: owners, rows, chunks, summaries, "
                     r"owner_keys, key_reservations, key_tombstones, deletions; reference: scratchvault_schema, "
                     r"meta; the coordinator's own: epoch_keys, epoch_reservations, epoch_tombstones$", out,
                     re.MULTILINE), out
    assert all(f" on {worker}" in out.split("placements: ")[1].splitlines()[0] for worker in workers)
    assert "ok    the vault's tables are distributed as scratchvault distributes them, and every placement" in out


def test_doctor_fails_an_object_planted_on_a_shard(tmp_path: Path, citus_cluster: CitusCluster,
                                                   citus_admin: psycopg.Connection,
                                                   vault_on_citus: DistributedVault) -> None:
    shard, worker = shard_on_a_worker(citus_admin, citus_cluster, vault_on_citus.schema, "chunks")
    with as_attacker(worker) as node:
        node.execute(sql.SQL("CREATE RULE planted AS ON DELETE TO {} DO INSTEAD NOTHING").format(
            sql.Identifier(vault_on_citus.schema, shard)))
    code, out = _doctor(tmp_path, vault_on_citus)
    assert code == 1
    assert ("FAIL  the vault's tables on Citus are not as scratchvault placed them: rule added on chunks (1 shard)"
            in out) and "planted" not in out


def test_doctor_fails_a_worker_that_does_not_wait_for_its_wal(tmp_path: Path, citus_cluster: CitusCluster,
                                                              vault_on_citus: DistributedVault) -> None:
    role = psycopg.conninfo.conninfo_to_dict(vault_on_citus.url)["user"]
    lax, strict = citus_cluster.worker_urls
    with as_attacker(lax) as node:  # on that worker only, for the vault's role (dropped with it)
        node.execute(sql.SQL("ALTER ROLE {} SET synchronous_commit = off").format(sql.Identifier(str(role))))
    code, out = _doctor(tmp_path, vault_on_citus)
    assert code == 1
    assert (f"FAIL  worker {_worker(lax)}: synchronous_commit off: a crash can lose rows a put acknowledged"
            in out)
    assert f"ok    worker {_worker(strict)}: fsync on; synchronous_commit on" in out


def test_doctor_fails_a_worker_that_writes_no_full_pages(tmp_path: Path, citus_cluster: CitusCluster,
                                                         vault_on_citus: DistributedVault) -> None:
    worker = citus_cluster.worker_urls[1]
    with connect(worker) as node:
        node.execute("ALTER SYSTEM SET full_page_writes = off")
        try:
            _reload(node, "off")
            code, out = _doctor(tmp_path, vault_on_citus)
        finally:
            node.execute("ALTER SYSTEM RESET full_page_writes")
            _reload(node, "on")
    assert code == 1
    assert f"FAIL  worker {_worker(worker)}: full_page_writes off: a crash can leave torn pages" in out


def _reload(node: psycopg.Connection, full_page_writes: str) -> None:
    """Reloads the node's configuration and waits until a new session sees ``full_page_writes``."""
    node.execute("SELECT pg_reload_conf()")
    url = node.info.dsn
    for _ in range(100):
        with connect(url) as fresh:
            if fresh.execute("SHOW full_page_writes").fetchone() == (full_page_writes,):
                return
        time.sleep(0.05)
    raise AssertionError(f"full_page_writes did not become {full_page_writes}")
