"""The destruction of owners' key versions (keys/manager.py: ``retire_owner_versions``, ``destroy_owner``,
``sweep``, ``adopt_owner_marks``; threat_model.md, "Keyring entries" and "What the database cannot move") on a
MemoryKeyring and a small double of the owner key records (tests/support/owner_key_versions.py): the retired mark
raised before the tombstones, the refusal to split the old layout's entry, a shred that destroys what this process
holds whatever the database lists, the sweep's scope, and the issued marks adopted once. A version a shred leaves out
or a sweep does not look under is a key left behind.
"""

from __future__ import annotations

import pytest

from keys.errors import InvalidArgument
from keys.keyring.owner_marks import ALWAYS_PROBED
from tests.support.owner_key_versions import (
    ALICE,
    BOB,
    PREFIX,
    made_elsewhere,
    mark,
    plant,
    scene,
    schema3_entry,
    tag_of,
)

SPLIT = ("this owner's older key versions share one keyring entry from before schema 4 with a version that stays, "
         "and that entry is never rewritten: run rotate_owner_key and rewrap, then retire (the old entry is then "
         "deleted whole)")


def test_a_retirement_raises_the_retired_mark_past_its_versions_and_tombstones_them():
    manager, records, ring = scene()
    owner_tag = tag_of(manager, ALICE)
    made_elsewhere(ring, records, owner_tag, 1, 2, 3)
    assert manager.retire_owner_versions(ALICE, {1, 2}) == {1, 2}
    assert mark(ring, "retired", owner_tag) == "3" and records.tombstone_calls == [(owner_tag, {1, 2})]
    keyset = manager.owner_keyset(ALICE)
    assert keyset is not None and keyset.versions == (3,)


def test_a_retirement_that_would_split_the_old_layouts_entry_is_refused_untouched():
    manager, records, ring = scene()
    owner_tag = tag_of(manager, ALICE)
    schema3_entry(ring, records, owner_tag, 1, 2)
    with pytest.raises(InvalidArgument) as refused:
        manager.retire_owner_versions(ALICE, {1})
    assert str(refused.value) == SPLIT
    assert mark(ring, "retired", owner_tag) is None and records.tombstone_calls == []


def test_a_retirement_of_versions_outside_the_old_layouts_entry_goes_on_while_it_keeps_a_live_one():
    manager, records, ring = scene()
    owner_tag = tag_of(manager, ALICE)
    schema3_entry(ring, records, owner_tag, 1)
    made_elsewhere(ring, records, owner_tag, 2, 3)
    assert manager.retire_owner_versions(ALICE, {2}) == {2}
    assert records.tombstone_calls == [(owner_tag, {2})]


def test_a_shred_destroys_the_versions_this_process_holds_though_the_database_no_longer_lists_them():
    manager, records, ring = scene()
    owner_tag = tag_of(manager, ALICE)
    made_elsewhere(ring, records, owner_tag, 1, 2)
    assert manager.owner_keyset(ALICE) is not None  # held by this process
    del records.commitments[owner_tag][1]  # hidden by a writer of the database
    records.reserved.discard((owner_tag, 1))
    records.reserved.add((owner_tag, 3))  # a rotation in flight
    assert manager.destroy_owner(ALICE) == (owner_tag, {1, 2, 3})
    assert records.tombstone_calls == [(owner_tag, None)]
    assert manager.owner_keyset(ALICE) is None
    manager.sweep(owner_tag, destroyed={1, 2, 3})
    assert ring.present(owner_tag) == set()


def test_a_shred_of_an_owner_this_process_holds_nothing_of_destroys_what_the_database_lists():
    manager, records, ring = scene()
    owner_tag = tag_of(manager, ALICE)
    made_elsewhere(ring, records, owner_tag, 1, 2)
    assert manager.destroy_owner(ALICE) == (owner_tag, {1, 2})


def test_a_sweep_deletes_the_versions_destroyed_here_that_no_tombstone_names():
    manager, _, ring = scene()
    owner_tag = tag_of(manager, ALICE)
    plant(ring, owner_tag, 5, 6)
    assert manager.sweep(owner_tag, destroyed={5}) == 1
    assert ring.present(owner_tag) == {6}


def test_a_sweep_looks_again_under_swept_tombstones_only_when_asked():
    manager, records, ring = scene()
    owner_tag = tag_of(manager, ALICE)
    records.tombs[(owner_tag, 1)] = True
    plant(ring, owner_tag, 1)  # a write given up that landed after the sweep
    assert manager.sweep(owner_tag) == 0 and ring.present(owner_tag) == {1}
    assert manager.sweep(owner_tag, everything=True) == 1 and ring.present(owner_tag) == set()


def test_a_sweep_of_one_owner_leaves_another_owners_entries():
    manager, records, ring = scene()
    alice, bob = tag_of(manager, ALICE), tag_of(manager, BOB)
    records.tombs[(alice, 1)] = records.tombs[(bob, 1)] = False
    plant(ring, alice, 1)
    plant(ring, bob, 1)
    assert manager.sweep(alice) == 0
    assert ring.present(alice) == set() and ring.present(bob) == {1} and records.tombs[(bob, 1)] is False
    assert manager.sweep(None) == 0 and ring.present(bob) == set()


def test_the_issued_marks_are_adopted_once_from_the_versions_the_database_lists():
    manager, records, ring = scene()
    alice, bob = tag_of(manager, ALICE), tag_of(manager, BOB)
    records.reserved |= {(alice, ALWAYS_PROBED + 4), (bob, 3)}
    manager.adopt_owner_marks()
    assert mark(ring, "issued", alice) == str(ALWAYS_PROBED + 4) and mark(ring, "issued", bob) is None
    assert (f"{PREFIX}/owner-issued", "adopted") in ring.secrets and records.tops_reads == 1
    records.reserved.add((alice, ALWAYS_PROBED + 9))
    manager.adopt_owner_marks()
    assert mark(ring, "issued", alice) == str(ALWAYS_PROBED + 4) and records.tops_reads == 1
