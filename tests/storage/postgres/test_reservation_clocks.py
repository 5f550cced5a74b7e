"""Hosts whose clocks disagree share one PostgreSQL database: a host whose clock runs ahead must not void the key
version another host reserved and is writing. A reservation is stamped, and judged abandoned, by the database
server's clock; reserving waits for a version being written (the key lock); a commitment is never recorded for a
version a tombstone names, and a put never takes the commitment of a tombstoned version."""

from __future__ import annotations

import pytest

from tests.storage.contract_support import NOW, OWNER, Ids, put
from vault.storage import open_store

pytestmark = pytest.mark.postgres
ALLOWANCE = 80.0  # what a vault with a 10 s keyring timeout allows a reservation (2 x timeout + 60 s)
AHEAD = 120.0  # the second host's clock, ahead of the first's


@pytest.fixture
def store(pg_schemas):
    store = open_store(pg_schemas("clocks"), pool_size=4)
    yield store
    store.close()


def test_a_host_whose_clock_runs_ahead_abandons_nothing_another_host_just_reserved(store):
    commitments = store.commitments
    writing = commitments.reserve_owner_version(OWNER, NOW, NOW - ALLOWANCE)  # the first host, about to write
    ahead = NOW + AHEAD
    assert commitments.reserve_owner_version(OWNER, ahead, ahead - ALLOWANCE) == writing + 1
    assert commitments.version_pending(OWNER, writing)
    assert commitments.tombstones(OWNER, unswept_only=False) == []


def test_a_version_a_tombstone_names_gets_no_commitment_and_no_put_takes_it(store):
    commitments = store.commitments
    version = commitments.reserve_owner_version(OWNER, NOW, NOW - ALLOWANCE)
    commitments.tombstone_owner_versions(OWNER, {version})  # voided while its key was being written
    commitments.record_owner_commitment(OWNER, version, b"check", b"sealed name")
    assert commitments.owner_commitments(OWNER) == {}
    with store.transaction() as tx:  # a commitment row a writer of the database puts back beside the tombstone
        tx._run("INSERT INTO owner_keys (owner_tag, version, check_value) VALUES (%s, %s, %s)",
                (OWNER, version, b"check"))
    with store.transaction() as tx:
        assert tx.next_seq_and_commitments(OWNER, version)[1] is None
    put(store, Ids(), version=version + 1, expires=NOW + 60)  # the store itself is fine
