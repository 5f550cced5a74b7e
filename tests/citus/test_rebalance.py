"""Citus's rebalancer moves owners' shards to a new worker while those owners put and read: afterwards some shards
of the vault live on the new worker, every row put (before or during the moves) reads back exactly, no owner reads
another's row, and nothing raised an IntegrityError or any other error.

The rebalancer runs as Citus runs it (``rebalance_table_shards``, shards moved by logical replication while writes
go on), limited to one move among the shard groups of the owners under load, to keep the test short and to move
shards that are being written."""

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

MOVES = 1
THREADS = 4
OWNERS = 8


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


def _owners(load: Load, admin: psycopg.Connection, schema: str) -> dict[Principal, int]:
    """The owners under load, each with a first row (kept), and the ``rows`` shard of each."""
    known: set[bytes] = set()
    shards = {}
    for number in range(OWNERS):
        owner, content = Principal(f"owner-{number}"), f"first row of owner {number}"
        load.rows[load.vault.put(owner, "first", 0, "tool", content).id] = (owner, content)
        load.owners.append(owner)
        shards[owner] = placement(admin, schema, "rows", new_owner_tag(admin, schema, known)).shard
    return shards


def _other_shards(admin: psycopg.Connection, rows_table: str, loaded: set[int]) -> list[int]:
    """Every shard co-located with ``rows_table`` but in none of the shard groups of ``loaded`` (rows shards)."""
    return [int(shard) for (shard,) in admin.execute(
        "SELECT s.shardid FROM pg_dist_shard s JOIN pg_dist_partition p USING (logicalrelid) "
        "WHERE p.colocationid = (SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = %s::regclass) "
        "AND s.shardminvalue NOT IN (SELECT shardminvalue FROM pg_dist_shard WHERE shardid = ANY(%s))",
        [rows_table, list(loaded)])]


def test_the_rebalancer_moves_owners_shards_while_they_put_and_read(citus_cluster: CitusCluster,
                                                                   citus_admin: psycopg.Connection,
                                                                   grown: Grown) -> None:
    rows_table = f"{grown.schema}.rows"
    with Vault.open(citus_cluster.url(schema=grown.schema), keyring_backend=MemoryKeyring()) as vault:
        require_owner_tables_distributed(citus_admin, grown.schema)
        load = Load(vault)
        shard_of = _owners(load, citus_admin, grown.schema)
        loaded = set(shard_of.values())
        new_port = port_of(grown.spare_url)
        citus_admin.execute("SELECT citus_add_node('127.0.0.1', %s)", [new_port])
        owners, first_rows = load.owners, len(load.rows)
        threads = load.threads()
        for thread in threads:
            thread.start()
        try:
            citus_admin.execute("SELECT rebalance_table_shards(%s, max_shard_moves => %s, excluded_shard_list => %s)",
                                [rows_table, MOVES, _other_shards(citus_admin, rows_table, loaded)])
        finally:
            load.stop.set()
            for thread in threads:
                thread.join(timeout=60)
        assert load.errors == [], f"the load failed: {load.errors!r}"
        assert len(load.rows) - first_rows >= 2 * len(owners), "the load made too few puts to show anything"

        moved = {int(shard) for (shard,) in citus_admin.execute(
            "SELECT shardid FROM citus_shards WHERE table_name = %s::regclass AND nodeport = %s",
            [rows_table, new_port])}
        assert len(moved) == MOVES and moved <= loaded, f"moved to the new worker: {moved}, under load: {loaded}"
        written = {owner for owner, _ in list(load.rows.values())[first_rows:]}
        assert {owner for owner in owners if shard_of[owner] in moved} <= written, "a moved owner made no put"
        for row_id, (owner, content) in load.rows.items():  # the owners' first rows among them
            assert vault.get(owner, row_id).content == content
            with pytest.raises(NotFound):
                vault.read(Principal("nobody"), row_id)
