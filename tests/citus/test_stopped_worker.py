"""A worker that stops as a crash stops it (``pg_ctl stop -m immediate``): every operation of an owner it holds
fails with StorageError and leaves nothing of itself behind, while an owner on the other worker goes on as before;
once the worker is started again both owners have all their rows, and the first owner works again.

The worker is started again whatever the test met: the tests after it find the cluster whole."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from keys.testing import MemoryKeyring
from tests.support import citus_nodes
from tests.support.citus import CitusCluster
from tests.support.citus_placement import OWNER_TABLES, new_owner_tag, placement, require_owner_tables_distributed
from vault import NotFound, Principal, StorageError, Vault

MAX_OWNERS = 64  # owners tried until two are on different workers: all on one by chance is 2**-63
LARGE = "a line of a large page\n" * 6_000  # about 140 KB: three chunks


def _two_owners_apart(vault: Vault, admin: psycopg.Connection, schema: str) -> dict[int, tuple[Principal, bytes]]:
    """An owner (with a small and a large row) on each of two workers: worker port -> (owner, its tag)."""
    known: set[bytes] = set()
    by_port: dict[int, tuple[Principal, bytes]] = {}
    for number in range(MAX_OWNERS):
        owner = Principal(f"owner-{number}")
        vault.put(owner, "t1", 1, "tool", f"small row of {owner.user_id}")
        tag = new_owner_tag(admin, schema, known)
        port = placement(admin, schema, "rows", tag).port
        if port not in by_port:
            vault.put(owner, "t1", 2, "tool", LARGE)
            by_port[port] = (owner, tag)
        if len(by_port) == 2:
            return by_port
    raise AssertionError(f"{MAX_OWNERS} owners all on one worker")


def _records(admin: psycopg.Connection, schema: str, tag: bytes) -> dict[str, int]:
    """How many rows of each owner table hold the owner ``tag``, through the coordinator."""
    counts = {}
    for table in OWNER_TABLES:
        counted = admin.execute(sql.SQL("SELECT count(*) FROM {} WHERE owner_tag = %s").format(
            sql.Identifier(schema, table)), [tag]).fetchone()
        assert counted is not None
        counts[table] = int(counted[0])
    return counts


def _operations(vault: Vault, owner: Principal, row_id: str) -> dict[str, Callable[[], object]]:
    """Each kind of operation an owner makes, on one of its rows where it takes one."""
    return {"put": lambda: vault.put(owner, "t2", 1, "tool", "written while a worker is down"),
            "large put": lambda: vault.put(owner, "t2", 2, "tool", LARGE),
            "read": lambda: vault.read(owner, row_id, mode="range", start=0, end=5),
            "get": lambda: vault.get(owner, row_id),
            "list": lambda: vault.list_for_turn(owner, "t1"),
            "extend": lambda: vault.extend(owner, row_id, 7200),
            "delete": lambda: vault.delete(owner, row_id),
            "rotate": lambda: vault.rotate_owner_key(owner.user_id)}


@pytest.fixture
def quiet_admin(citus_admin: psycopg.Connection) -> psycopg.Connection:
    """The superuser's session keeping no connection to a worker past a statement: one cached across a worker's
    restart would be broken, and the next statement (the schema's drop among them) would fail on it."""
    citus_admin.execute("SET citus.max_cached_conns_per_worker = 0")
    return citus_admin


def _data_dir(cluster: CitusCluster, port: int) -> Path:
    data_dirs, _ = cluster.files()
    return data_dirs[1 + [citus_nodes.port_of(url) for url in cluster.worker_urls].index(port)]


def test_a_stopped_worker_fails_its_owners_operations_and_spares_the_others(citus_cluster: CitusCluster,
                                                                           quiet_admin: psycopg.Connection,
                                                                           citus_schema: str) -> None:
    _, pg_ctl = citus_cluster.files()
    with Vault.open(citus_cluster.url(schema=citus_schema), keyring_backend=MemoryKeyring()) as vault:
        require_owner_tables_distributed(quiet_admin, citus_schema)
        by_port = _two_owners_apart(vault, quiet_admin, citus_schema)
        down_port, up_port = sorted(by_port)
        (down, down_tag), (up, up_tag) = by_port[down_port], by_port[up_port]
        down_rows = {rep.id: vault.get(down, rep.id).content for rep in vault.list_for_turn(down, "t1")}
        before = _records(quiet_admin, citus_schema, down_tag)

        with citus_nodes.stopped(pg_ctl, _data_dir(citus_cluster, down_port)):
            for name, operation in _operations(vault, down, next(iter(down_rows))).items():
                with pytest.raises(StorageError):
                    operation()
                    pytest.fail(f"{name} of an owner on the stopped worker did not fail")
            up_row = vault.put(up, "t2", 1, "tool", "written while the other worker is down")
            assert vault.get(up, up_row.id).content == "written while the other worker is down"
            assert vault.read(up, up_row.id, mode="range", start=0, end=7).content == "written"
            assert len(vault.list_for_turn(up, "t1")) == 2
            vault.delete(up, up_row.id)
            assert vault.rotate_owner_key(up.user_id) == 2 and vault.rewrap(up.user_id) == 2

        assert _records(quiet_admin, citus_schema, down_tag) == before, "a failed operation left records behind"
        for row_id, content in down_rows.items():
            assert vault.get(down, row_id).content == content
        assert vault.list_for_turn(down, "t2") == []
        assert len(vault.list_for_turn(up, "t1")) == 2
        with pytest.raises(NotFound):
            vault.read(up, up_row.id)
        again = vault.put(down, "t3", 1, "tool", "after the restart")
        assert vault.get(down, again.id).content == "after the restart"
        assert vault.rotate_owner_key(down.user_id) >= 2 and vault.rewrap(down.user_id) == len(down_rows) + 1
        assert _records(quiet_admin, citus_schema, up_tag)["rows"] == 2


def test_an_owner_on_a_live_worker_extends_and_puts_into_a_new_expiry_epoch(citus_cluster: CitusCluster,
                                                                           quiet_admin: psycopg.Connection,
                                                                           citus_schema: str) -> None:
    """A lifetime ending in an expiry epoch no row used yet needs that epoch's key recorded first: the owner on the
    live worker gets it as when every worker is up."""
    _, pg_ctl = citus_cluster.files()
    with Vault.open(citus_cluster.url(schema=citus_schema), keyring_backend=MemoryKeyring()) as vault:
        require_owner_tables_distributed(quiet_admin, citus_schema)
        by_port = _two_owners_apart(vault, quiet_admin, citus_schema)
        down_port, up_port = sorted(by_port)
        up = by_port[up_port][0]
        row_id = vault.list_for_turn(up, "t1")[0].id
        with citus_nodes.stopped(pg_ctl, _data_dir(citus_cluster, down_port)):
            vault.extend(up, row_id, 4 * 3600)
            longer = vault.put(up, "t2", 1, "tool", "lives a day", ttl_seconds=24 * 3600)
        assert vault.get(up, longer.id).content == "lives a day"
