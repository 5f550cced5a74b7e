"""The vault sharded by owner over Citus, as Citus reports it: opened on the coordinator, the vault's owner tables
are hash-distributed by owner_tag in one co-location group, owners' rows land on both workers, and everything of
one owner (rows, chunks, summaries, owner keys, the ledger of deleted rows, the owner record) lies on one worker,
in the shard tables Citus names, and on no other."""

from __future__ import annotations

import psycopg
import pytest

from keys.testing import MemoryKeyring
from tests.support.citus import CitusCluster, connect
from tests.support.citus_nodes import port_of
from tests.support.citus_placement import (
    OWNER_TABLES,
    held_on,
    new_owner_tag,
    placement,
    require_owner_tables_distributed,
)
from vault import NotFound, Principal, Vault

OWNERS = 12  # all on one worker of two by chance: 2 * 2**-12
LARGE = "a line of a large page\n" * 6_000  # about 140 KB: three chunks, two of them in the chunks table


def _put_records(vault: Vault, owner: Principal) -> dict[str, str]:
    """A small row, a large one, and a deleted one (an entry in the owner's ledger); id -> content kept."""
    small = f"small row of {owner.user_id}\n" * 50
    kept = {vault.put(owner, "t1", 1, "tool", small).id: small,
            vault.put(owner, "t1", 2, "tool", LARGE + owner.user_id).id: LARGE + owner.user_id}
    vault.delete(owner, vault.put(owner, "t1", 3, "tool", "deleted").id)
    return kept


def test_owners_land_on_both_workers_and_each_owners_records_on_one(citus_cluster: CitusCluster,
                                                                    citus_admin: psycopg.Connection,
                                                                    citus_schema: str) -> None:
    owners = [Principal(f"owner-{number}") for number in range(OWNERS)]
    kept: dict[Principal, dict[str, str]] = {}
    tags: dict[Principal, bytes] = {}
    known: set[bytes] = set()
    with Vault.open(citus_cluster.url(schema=citus_schema), keyring_backend=MemoryKeyring()) as vault:
        require_owner_tables_distributed(citus_admin, citus_schema)
        for owner in owners:
            kept[owner] = _put_records(vault, owner)
            tags[owner] = new_owner_tag(citus_admin, citus_schema, known)

        workers = {owner: placement(citus_admin, citus_schema, "rows", tags[owner]).port for owner in owners}
        assert len(set(workers.values())) >= 2, f"{OWNERS} owners all on one worker: {workers}"
        for owner in owners:
            ports = {table: placement(citus_admin, citus_schema, table, tags[owner]).port for table in OWNER_TABLES}
            assert set(ports.values()) == {workers[owner]}, f"an owner's records are split over workers: {ports}"

        for url in citus_cluster.worker_urls:
            with connect(url) as worker:
                for owner in owners:
                    _check_worker_copy(worker, url, citus_admin, citus_schema, tags[owner], workers[owner])

        for owner in owners:
            for row_id, content in kept[owner].items():
                assert vault.get(owner, row_id).content == content
                for other in owners[:3]:
                    if other != owner:
                        with pytest.raises(NotFound):
                            vault.read(other, row_id)


def _check_worker_copy(worker: psycopg.Connection, url: str, admin: psycopg.Connection, schema: str, tag: bytes,
                       owner_port: int) -> None:
    """On the owner's worker, its shard tables hold all its records; on any other, none of those shards exist."""
    counts = {table: held_on(worker, schema, table, placement(admin, schema, table, tag).shard, tag)
              for table in ("rows", "chunks", "owner_keys", "deletions", "owners", "summaries")}
    if port_of(url) != owner_port:
        assert set(counts.values()) == {None}, f"an owner's shard is also on another worker: {counts}"
        return
    assert counts["rows"] == 2 and counts["owners"] == 1 and counts["deletions"] == 1, counts
    assert counts["chunks"] is not None and counts["chunks"] > 1, counts
    assert counts["owner_keys"] is not None and counts["owner_keys"] >= 1, counts
    assert counts["summaries"] is not None, counts  # new rows keep their summary in the rows tuple
