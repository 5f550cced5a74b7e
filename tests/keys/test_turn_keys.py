"""Summaries sealed under turn keys (derived from the owner key) through the key lifecycle: rewrap re-seals those
of old versions and retirement changes nothing visible; a keyset cached stale in another Vault (its owner shredded
and re-created elsewhere) is reloaded once per listing, not reported as tampering."""

from __future__ import annotations

import pytest

from vault import Principal, Vault

ALICE, BOB = Principal("alice"), Principal("bob")


def summary_blob(attacker, row: str) -> bytes:
    return attacker.read(attacker.seq_of(row), "summary")


def key_version(attacker, row: str) -> int:
    return attacker.read(attacker.seq_of(row), "key_version")


def put_world(vault) -> dict[str, str]:
    return {"t1": vault.put(ALICE, "t", 1, "web.fetch", "alice's first page " * 50).id,
            "t2": vault.put(ALICE, "t", 2, "ls", {"entries": [1, 2, 3], "count": 3, "status": "ok"}).id,
            "u1": vault.put(ALICE, "u", 1, "download", bytes(range(256))).id,
            "bob": vault.put(BOB, "t", 1, "web.fetch", "bob's page").id}


# -- rotation, rewrap, retirement ------------------------------------------------------------------------
def summaries_seen(vault, ids) -> dict[str, tuple]:
    return {row: (vault.get(ALICE, row).summary, vault.get(ALICE, row).retained) for row in ids}


def test_rewrap_reseals_old_version_summaries_and_retirement_changes_nothing_visible(vault, db_path, attacker,
                                                                                     keyring_backend):
    old = [*list(put_world(vault).values())[:3], vault.put(ALICE, "t", 3, "x", {"total": 2**53, "items": []}).id]
    assert vault.rotate_owner_key("alice") == 2
    new = [vault.put(ALICE, turn, 9, "y", f"after rotation {turn}").id for turn in ("t", "u")]
    lists = {turn: vault.list_for_turn(ALICE, turn) for turn in ("t", "u")}
    seen = summaries_seen(vault, old + new)
    blobs = {row: summary_blob(attacker, row) for row in old + new}
    assert {row: key_version(attacker, row) for row in old + new} == {**dict.fromkeys(old, 1), **dict.fromkeys(new, 2)}
    assert vault.rewrap("alice") == len(old)
    assert vault.retire_old_key_versions("alice") == 1
    assert all(summary_blob(attacker, row) != blobs[row] for row in old)  # re-sealed under v2 and the epoch
    assert all(summary_blob(attacker, row) == blobs[row] for row in new)  # already under the primary: untouched
    assert all(blob[0] == 0x05 for blob in attacker.summaries().values())  # format 3: under version 2 and the epoch
    assert {key_version(attacker, row) for row in old + new} == {2}
    with Vault.open(db_path, keyring_backend=keyring_backend) as fresh:  # and without any cached key
        for reader in (vault, fresh):
            assert {turn: reader.list_for_turn(ALICE, turn) for turn in ("t", "u")} == lists
            assert summaries_seen(reader, old + new) == seen
    assert vault.stats()["counters"]["integrity_failures"] == 0


# -- a stale keyset in another Vault ---------------------------------------------------------------------
@pytest.fixture
def shredded_elsewhere(db_path, keyring_backend):
    """Vault ``stale`` caches alice's keyset; ``other`` shreds her and stores rows under her new version 1."""
    with Vault.open(db_path, keyring_backend=keyring_backend) as stale, \
            Vault.open(db_path, keyring_backend=keyring_backend) as other:
        old = stale.put(ALICE, "t", 1, "x", "under the shredded key").id
        assert [rep.id for rep in stale.list_for_turn(ALICE, "t")] == [old]
        other.shred_owner("alice")
        yield stale, other, [other.put(ALICE, "t", n, "x", f"under the new key, {n}").id for n in range(2, 6)]


def test_a_stale_cached_keyset_is_reloaded_for_a_listing_not_reported_as_tampering(shredded_elsewhere):
    stale, other, fresh = shredded_elsewhere
    listing = stale.list_for_turn(ALICE, "t")
    assert listing == other.list_for_turn(ALICE, "t")
    assert [rep.id for rep in listing] == fresh
    assert stale.get(ALICE, fresh[0]).content == "under the new key, 2"
    assert stale.list_for_turn(ALICE, "t") == listing
    assert stale.stats()["counters"]["integrity_failures"] == 0


def test_a_stale_cached_keyset_is_reloaded_once_per_listing_not_once_per_row(shredded_elsewhere, keyring_backend):
    stale, _, fresh = shredded_elsewhere
    reads = keyring_backend.reads
    assert len(stale.list_for_turn(ALICE, "t")) == len(fresh) == 4
    assert keyring_backend.reads - reads <= 1
