"""Citus's rebalancer moves owners' shards to a new worker while those owners put and read: afterwards some shards
of the vault live on the new worker, every row put (before or during the moves) reads back exactly, no owner reads
another's row, and nothing raised an IntegrityError or any other error.

The rebalancer runs as Citus runs it (``rebalance_table_shards``, shards moved by logical replication while writes
go on), limited to two moves to keep the test short; the owners under load are chosen so that every shard group it
plans to move holds one of them."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from typing import NamedTuple

import psycopg
import pytest

from keys.testing import MemoryKeyring
from tests.support.citus import CitusCluster, scratch_schema
from tests.support.citus_nodes import port_of, spare_worker
from tests.support.citus_placement import new_owner_tag, placement, require_owner_tables_distributed
from vault import NotFound, Principal, Vault

MOVES = 2
THREADS = 4
MAX_OWNERS = 400  # owners tried to find one in each planned shard group: (31/32)**400 misses a group


class Grown(NamedTuple):
    """A scratch schema, and a started node the test may add as a third worker (dropped, then removed, after)."""

    schema: str
    spare_url: str


@pytest.fixture
def grown(citus_cluster: CitusCluster, citus_admin: psycopg.Connection) -> Iterator[Grown]:
    _, pg_ctl = citus_cluster.files()
    with spare_worker(citus_cluster.coordinator_url, pg_ctl) as spare_url, scratch_schema(citus_admin) as schema:
        yield Grown(schema, spare_url)


class Load:
    """Owners putting and reading in threads until stopped; each row put, its owner and content, kept."""

    def __init__(self, vault: Vault) -> None:
        self.vault = vault
        self.owners: list[Principal] = []
        self.stop = threading.Event()
        self.rows: dict[str, tuple[Principal, str]] = {}
        self.errors: list[BaseException] = []
        self.lock = threading.Lock()

    def run(self, owners: list[Principal]) -> None:
        try:
            for count in itertools.count():
                if self.stop.is_set():
                    return
                owner = owners[count % len(owners)]
                content = f"{owner.user_id} row {count} " * (1 if count % 3 else 4_000)  # every third: chunks
                row_id = self.vault.put(owner, "load", count, "tool", content).id
                assert self.vault.get(owner, row_id).content == content
                stranger = self.owners[(self.owners.index(owner) + 1) % len(self.owners)]
                with pytest.raises(NotFound):
                    self.vault.read(stranger, row_id)
                with self.lock:
                    self.rows[row_id] = (owner, content)
        except BaseException as error:  # reported by the test thread
            self.errors.append(error)

    def threads(self) -> list[threading.Thread]:
        return [threading.Thread(target=self.run, args=(self.owners[number::THREADS],), daemon=True)
                for number in range(THREADS)]


def _owners_in(load: Load, admin: psycopg.Connection, schema: str, groups: set[int]) -> None:
    """Owners for the load (each with a first row, kept) until every shard of ``groups`` (``rows`` shard ids)
    holds one, and as many on shards that stay."""
    known: set[bytes] = set()
    moving: dict[int, Principal] = {}
    staying: list[Principal] = []
    for number in range(MAX_OWNERS):
        owner, content = Principal(f"owner-{number}"), f"first row of owner {number}"
        load.rows[load.vault.put(owner, "first", 0, "tool", content).id] = (owner, content)
        shard = placement(admin, schema, "rows", new_owner_tag(admin, schema, known)).shard
        if shard in groups:
            moving.setdefault(shard, owner)
        elif len(staying) < len(groups):
            staying.append(owner)
        if len(moving) == len(groups) and len(staying) == len(groups):
            load.owners = [*moving.values(), *staying]
            return
    raise AssertionError(f"{MAX_OWNERS} owners did not cover the shards the rebalancer plans to move")


def test_the_rebalancer_moves_owners_shards_while_they_put_and_read(citus_cluster: CitusCluster,
                                                                   citus_admin: psycopg.Connection,
                                                                   grown: Grown) -> None:
    rows_table = f"{grown.schema}.rows"
    with Vault.open(citus_cluster.url(schema=grown.schema), keyring_backend=MemoryKeyring()) as vault:
        require_owner_tables_distributed(citus_admin, grown.schema)
        vault.put(Principal("nobody"), "first", 0, "tool", "the tables made")
        new_port = port_of(grown.spare_url)
        citus_admin.execute("SELECT citus_add_node('127.0.0.1', %s)", [new_port])
        plan = citus_admin.execute("SELECT shardid, targetport FROM get_rebalance_table_shards_plan(%s, "
                                   "max_shard_moves => %s) WHERE table_name = %s::regclass",
                                   [rows_table, MOVES, rows_table]).fetchall()  # with each, its co-located shards
        assert len(plan) == MOVES and {port for _, port in plan} == {new_port}, plan
        planned = {int(shard) for shard, _ in plan}
        load = Load(vault)
        _owners_in(load, citus_admin, grown.schema, planned)
        owners, first_rows = load.owners, len(load.rows)
        threads = load.threads()
        for thread in threads:
            thread.start()
        try:
            citus_admin.execute("SELECT rebalance_table_shards(%s, max_shard_moves => %s)", [rows_table, MOVES])
        finally:
            load.stop.set()
            for thread in threads:
                thread.join(timeout=60)
        assert load.errors == [], f"the load failed: {load.errors!r}"
        assert len(load.rows) - first_rows >= 2 * len(owners), "the load made too few puts to show anything"

        moved = {int(shard) for (shard,) in citus_admin.execute(
            "SELECT shardid FROM citus_shards WHERE table_name = %s::regclass AND nodeport = %s",
            [rows_table, new_port])}
        assert moved == planned, f"the planned shards {planned} are not (all) on the new worker: {moved}"
        for row_id, (owner, content) in load.rows.items():  # the first rows of owners not under load among them
            assert vault.get(owner, row_id).content == content
            with pytest.raises(NotFound):
                vault.read(Principal("nobody"), row_id)
