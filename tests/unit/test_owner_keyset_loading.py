"""The loading and caching of owners' keysets (keys/manager.py: ``_load``, ``owner_keyset``, ``keyset_for_read``,
``forget``) on a MemoryKeyring that records each entry it is asked for and a small double of the owner key records
(tests/support/owner_key_versions.py): every recorded version whose entry exists, each checked against its
commitment; a missing one skipped unless a row needs it; what is cached under which owner, what is read again, and
the exact refusal of each path. A keyset cached past a shred elsewhere is a destroyed key still in use.
"""

from __future__ import annotations

import pytest

from keys.errors import KeyUnavailable
from keys.owner_keyset import OwnerKeyset
from tests.support.owner_key_versions import ALICE, BOB, SERVICE, made_elsewhere, scene, tag_of

_REPLACED = ("the OS keyring returned a different {what} than the one this vault recorded (the entry was replaced, "
             "truncated, or this is another keyring); restore it from the keyring backup")
MISSING = _REPLACED.format(what="keyset for this owner (a recorded key version is missing)")
SWAPPED = _REPLACED.format(what="key for this owner")
NONE_FOR_ROWS = ("the OS keyring holds no keys for this owner although the vault holds rows for them (wrong keyring, "
                 "or the entry was deleted); restore the keyring from backup. A new key is never generated over "
                 "existing rows")


def test_a_keyset_joins_every_recorded_version_whose_entry_exists_the_highest_primary():
    manager, records, ring = scene()
    owner_tag = tag_of(manager, ALICE)
    made = made_elsewhere(ring, records, owner_tag, 1, 2, 3)
    keyset = manager.owner_keyset(ALICE)
    assert keyset is not None and keyset.versions == (1, 2, 3) and keyset.primary == 3
    assert [keyset.commitment(v, b"v" * 16) for v in (1, 2, 3)] == [made.commitment(v, b"v" * 16) for v in (1, 2, 3)]
    assert ring.versions_read(owner_tag) == [1, 2, 3]


def test_a_missing_version_no_row_uses_is_skipped_and_the_later_ones_still_load():
    manager, records, ring = scene()
    owner_tag = tag_of(manager, ALICE)
    made_elsewhere(ring, records, owner_tag, 1, 2, 3)
    del ring.secrets[(SERVICE, f"{owner_tag.hex()}.1")]
    keyset = manager.owner_keyset(ALICE)
    assert keyset is not None and keyset.versions == (2, 3)
    assert ring.versions_read(owner_tag) == [1, 2, 3]


def test_a_missing_version_a_row_uses_is_key_unavailable():
    manager, records, ring = scene()
    owner_tag = tag_of(manager, ALICE)
    made_elsewhere(ring, records, owner_tag, 1, 2)
    del ring.secrets[(SERVICE, f"{owner_tag.hex()}.1")]
    records.in_use[owner_tag] = {1: 4}
    with pytest.raises(KeyUnavailable) as refused:
        manager.owner_keyset(ALICE)
    assert str(refused.value) == MISSING


def test_an_entry_holding_another_key_than_its_commitment_names_is_key_unavailable():
    manager, records, ring = scene()
    owner_tag = tag_of(manager, ALICE)
    made_elsewhere(ring, records, owner_tag, 1, 2)
    ring.secrets[(SERVICE, f"{owner_tag.hex()}.2")] = OwnerKeyset.generate(2).entry(2).reveal()
    with pytest.raises(KeyUnavailable) as refused:
        manager.owner_keyset(ALICE)
    assert str(refused.value) == SWAPPED


def test_a_loaded_keyset_is_cached_under_its_owner_and_refresh_reads_it_again():
    manager, records, ring = scene()
    alice, bob = tag_of(manager, ALICE), tag_of(manager, BOB)
    made_elsewhere(ring, records, alice, 1)
    made_elsewhere(ring, records, bob, 1)
    keyset = manager.owner_keyset(ALICE)
    assert manager.owner_keyset(BOB) is not keyset
    ring.asked.clear()
    assert manager.owner_keyset(ALICE) is keyset and ring.asked == []
    refreshed = manager.owner_keyset(ALICE, refresh=True)
    assert refreshed is not None and refreshed is not keyset and ring.versions_read(alice) == [1]


def test_an_owner_the_database_no_longer_records_is_dropped_from_the_cache():
    manager, records, ring = scene()
    owner_tag = tag_of(manager, ALICE)
    made_elsewhere(ring, records, owner_tag, 1)
    assert manager.owner_keyset(ALICE) is not None
    records.commitments[owner_tag].clear()  # shredded by another process
    assert manager.owner_keyset(ALICE, refresh=True) is None
    assert manager.owner_keyset(ALICE) is None


def test_forget_drops_only_that_owners_cached_keyset():
    manager, records, ring = scene()
    alice, bob = tag_of(manager, ALICE), tag_of(manager, BOB)
    made_elsewhere(ring, records, alice, 1)
    made_elsewhere(ring, records, bob, 1)
    manager.owner_keyset(ALICE)
    manager.owner_keyset(BOB)
    ring.asked.clear()
    manager.forget(ALICE)
    manager.owner_keyset(ALICE)
    manager.owner_keyset(BOB)
    assert ring.versions_read(alice) == [1] and ring.versions_read(bob) == []


def test_a_read_of_a_version_the_cached_keyset_lacks_reloads_it_once():
    manager, records, ring = scene()
    owner_tag = tag_of(manager, ALICE)
    made_elsewhere(ring, records, owner_tag, 1)
    manager.owner_keyset(ALICE)
    made_elsewhere(ring, records, owner_tag, 2)  # another process rotated
    ring.asked.clear()
    assert manager.keyset_for_read(ALICE, 2).versions == (1, 2)
    assert ring.versions_read(owner_tag) == [1, 2]


def test_a_read_for_an_owner_without_keys_is_key_unavailable_never_a_new_key():
    manager, records, ring = scene()
    with pytest.raises(KeyUnavailable) as refused:
        manager.keyset_for_read(ALICE, 1)
    assert str(refused.value) == NONE_FOR_ROWS
    assert ring.present(tag_of(manager, ALICE)) == set() and records.reservations == []
