"""The making of owners' key versions (keys/manager.py: ``_new_version``, ``_write_version``; threat_model.md,
"Keyring entries") on a MemoryKeyring that records each entry it is asked for and a small double of the owner key
records (tests/support/owner_key_versions.py): the reservation made before the write (and how old a reservation is
abandoned), the check under the lock that it still stands, the write-once entry built on the keyset the database
records now, the read-back against the commitment, the version bound, the tombstone of a reservation that got no
key, and the exact refusal of each path. A key returned that the database does not record, or a reservation of a
failed write left untombstoned, is a key a shred may never reach.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import keys.manager as manager_module
from keys.errors import IntegrityError, KeyUnavailable
from keys.keyring.edge import REMEDY
from keys.keyring.entries import MAX_VERSION
from tests.support.owner_key_versions import (
    ALICE,
    BOB,
    SERVICE,
    VAULT_ID,
    OwnerRecords,
    made_elsewhere,
    mark,
    plant,
    scene,
    set_mark,
    tag_of,
)

NOT_PENDING = "this owner's keys were destroyed or changed while a key version was being made; retry"
KNOWN = ("the OS keyring holds no keys for this owner although this vault already knows them; restore the keyring "
         "from backup (a new key would orphan that owner's rows)")
NOTHING_TO_ROTATE = ("the OS keyring holds no keys for this owner; nothing to rotate (restore the keyring from backup "
                     "if the vault holds rows for them)")
UNRECORDED = ("the database did not record this owner's new key version (it was destroyed meanwhile, or a row a "
              "writer of the database left conflicts); retry")
OUT_OF_VERSIONS = "this owner's keyset has run out of key versions"


def no_rows(owner_tag: bytes) -> bool:
    return False


def test_a_reservation_older_than_twice_the_keyring_timeout_and_a_minute_is_abandoned(monkeypatch):
    monkeypatch.setattr(manager_module, "time", SimpleNamespace(time=lambda: 1000.0))
    manager, records, _ = scene()
    manager.create_owner_keyset(ALICE, no_rows)
    assert records.reservations == [(tag_of(manager, ALICE), 1000.0, 930.0)]


def test_a_first_keyset_is_written_once_recorded_under_the_lock_and_cached():
    manager, records, ring = scene()
    keyset = manager.create_owner_keyset(ALICE, no_rows)
    owner_tag = tag_of(manager, ALICE)
    assert keyset.versions == (1,) and keyset.primary == 1
    assert records.commitments == {owner_tag: {1: keyset.commitment(1, VAULT_ID)}}
    assert ring.present(owner_tag) == {1} and records.locks == 1 and records.tombstone_calls == []
    ring.asked.clear()
    assert manager.owner_keyset(ALICE) is keyset and ring.asked == []


def test_a_reservation_no_longer_pending_under_the_lock_is_refused_unwritten_and_tombstoned():
    records = OwnerRecords()
    records.abandoned = True  # abandoned by another process's reservation, or destroyed by a shred, meanwhile
    manager, records, ring = scene(records)
    with pytest.raises(KeyUnavailable) as refused:
        manager.create_owner_keyset(ALICE, no_rows)
    owner_tag = tag_of(manager, ALICE)
    assert str(refused.value) == NOT_PENDING
    assert ring.present(owner_tag) == set() and records.tombstone_calls == [(owner_tag, {1})]


def test_a_rotation_builds_on_the_keyset_the_database_records_now_not_a_cached_one():
    manager, records, ring = scene()
    owner_tag = tag_of(manager, ALICE)
    made_elsewhere(ring, records, owner_tag, 1)
    assert manager.owner_keyset(ALICE).versions == (1,)  # cached
    made_elsewhere(ring, records, owner_tag, 2)  # another process rotated
    rotated = manager.rotate_owner_keyset(ALICE)
    assert rotated.versions == (1, 2, 3) and rotated.primary == 3
    assert set(records.commitments[owner_tag]) == {1, 2, 3} and ring.present(owner_tag) == {1, 2, 3}
    assert records.tombstone_calls == []


def test_a_first_keyset_another_writer_made_meanwhile_is_returned_and_only_our_reservation_is_tombstoned():
    manager, records, ring = scene()
    owner_tag = tag_of(manager, ALICE)
    theirs = made_elsewhere(ring, records, owner_tag, 1)
    keyset = manager.create_owner_keyset(ALICE, no_rows)
    assert keyset.versions == (1,) and keyset.commitment(1, VAULT_ID) == theirs.commitment(1, VAULT_ID)
    assert records.tombstone_calls == [(owner_tag, {2})]
    assert ring.present(owner_tag) == {1} and set(records.commitments[owner_tag]) == {1}


def test_a_first_keyset_over_rows_is_refused_unwritten():
    manager, records, ring = scene()
    owner_tag = tag_of(manager, ALICE)
    with pytest.raises(KeyUnavailable) as refused:
        manager.create_owner_keyset(ALICE, lambda tag: tag == owner_tag)
    assert str(refused.value) == KNOWN
    assert ring.present(owner_tag) == set() and records.tombstone_calls == [(owner_tag, {1})]


def test_a_first_keyset_over_recorded_versions_whose_entries_are_gone_is_refused_unwritten():
    manager, records, ring = scene()
    owner_tag = tag_of(manager, ALICE)
    records.commitments[owner_tag] = {1: bytes(32)}  # no row uses it: skipped by the load, yet the vault knows it
    with pytest.raises(KeyUnavailable) as refused:
        manager.create_owner_keyset(ALICE, no_rows)
    assert str(refused.value) == KNOWN
    assert ring.present(owner_tag) == set() and records.tombstone_calls == [(owner_tag, {2})]


def test_a_recreated_owner_first_deletes_the_entries_its_retired_mark_covers_and_only_its_own():
    manager, records, ring = scene()
    alice, bob = tag_of(manager, ALICE), tag_of(manager, BOB)
    set_mark(ring, "retired", alice, 3)
    plant(ring, alice, 1, 2)  # their tombstones removed by a writer of the database
    plant(ring, bob, 1)
    records.tombs[(bob, 1)] = False
    records.reserve_as = 3
    assert manager.create_owner_keyset(ALICE, no_rows).versions == (3,)
    assert ring.present(alice) == {3} and mark(ring, "swept", alice) == "3"
    assert ring.present(bob) == {1} and records.tombs[(bob, 1)] is False
    assert manager.stats()["keyring_entries_destroyed_on_sight"] == 2


def test_a_rotation_of_an_owner_without_keys_is_refused_unwritten():
    manager, records, ring = scene()
    owner_tag = tag_of(manager, ALICE)
    with pytest.raises(KeyUnavailable) as refused:
        manager.rotate_owner_keyset(ALICE)
    assert str(refused.value) == NOTHING_TO_ROTATE
    assert ring.present(owner_tag) == set() and records.tombstone_calls == [(owner_tag, {1})]


def test_a_version_whose_commitment_a_conflicting_row_replaced_is_refused_and_tombstoned():
    records = OwnerRecords()
    records.row_after_record = bytes(32)  # the row a writer of the database left: it stays, ours is not recorded
    manager, records, ring = scene(records)
    owner_tag = tag_of(manager, ALICE)
    with pytest.raises(KeyUnavailable) as refused:
        manager.create_owner_keyset(ALICE, no_rows)
    assert str(refused.value) == UNRECORDED
    assert records.tombstone_calls == [(owner_tag, {1})] and records.commitments[owner_tag] == {}
    assert manager.owner_keyset(ALICE) is None
    manager.sweep(owner_tag)  # the entry written is the tombstone's to delete
    assert ring.present(owner_tag) == set()


class TombstonedMeanwhile(OwnerRecords):
    """A shred that commits while the new version's entry is written: its commitment is then never recorded."""

    def record_owner_commitment(self, owner_tag: bytes, version: int, value: bytes, sealed_name: bytes) -> None:
        self.tombs[(owner_tag, version)] = False
        super().record_owner_commitment(owner_tag, version, value, sealed_name)


def test_a_version_tombstoned_while_its_entry_was_written_is_refused():
    manager, records, ring = scene(TombstonedMeanwhile())
    owner_tag = tag_of(manager, ALICE)
    with pytest.raises(KeyUnavailable) as refused:
        manager.create_owner_keyset(ALICE, no_rows)
    assert str(refused.value) == UNRECORDED
    assert records.commitments.get(owner_tag, {}) == {} and manager.owner_keyset(ALICE) is None
    manager.sweep(owner_tag)
    assert ring.present(owner_tag) == set()


def test_the_highest_version_is_made_and_one_past_it_is_refused_before_the_lock_unwritten():
    manager, records, ring = scene()
    owner_tag = tag_of(manager, ALICE)
    set_mark(ring, "issued", owner_tag, MAX_VERSION)
    records.reserve_as = MAX_VERSION
    assert manager.create_owner_keyset(ALICE, no_rows).versions == (MAX_VERSION,)
    manager, records, ring = scene()
    records.reserve_as = MAX_VERSION + 1
    with pytest.raises(KeyUnavailable) as refused:
        manager.create_owner_keyset(ALICE, no_rows)
    assert str(refused.value) == OUT_OF_VERSIONS
    assert records.locks == 0 and ring.present(tag_of(manager, ALICE)) == set()


def test_a_failed_write_keeps_its_error_though_tombstoning_its_reservation_fails_too():
    records = OwnerRecords()
    records.tombstone_error = IntegrityError("the database failed a read-back")
    manager, records, ring = scene(records)
    ring.failing_writes = {SERVICE}
    owner_tag = tag_of(manager, ALICE)
    with pytest.raises(KeyUnavailable) as refused:
        manager.create_owner_keyset(ALICE, no_rows)
    assert str(refused.value) == f"the OS keyring failed to write a key (OSError); {REMEDY}"
    assert records.tombstone_calls == [(owner_tag, {1})] and ring.present(owner_tag) == set()
