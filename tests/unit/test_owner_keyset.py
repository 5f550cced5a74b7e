"""An owner's keyset on its own (keys/owner_keyset.py): a rotation adds exactly one new version above every version
held, up to MAX_VERSION, and never replaces a key a row may need; the keyset of one version holds that version alone,
as primary; a version the keyset lacks, or a wrapped key of the wrong length, is refused with its exact text; the
turn summary keys and format 3 keys are derived once and kept in a bounded cache, and the format 3 keys of another
epoch key object are derived anew (never those combined with the key it replaced); the keyset shows no key and
refuses pickling."""

from __future__ import annotations

import pickle
import re

import pytest

from keys.epochs.epoch_key import EpochKey
from keys.errors import IntegrityError, KeyUnavailable
from keys.formats.data_key import DataKey
from keys.formats.v1 import WRAPPED_SIZE
from keys.keyring.entries import MAX_VERSION
from keys.owner_keyset import DERIVED_KEY_CACHE_SIZE, OwnerKeyset

VAULT_ID, OWNER_TAG, TURN_TAG, AAD = bytes(16), b"o" * 32, b"t" * 32, b"row"
LENGTH = 3600
NOT_HELD = "row refers to a key version this owner's keyset does not hold"
OUT_OF_VERSIONS = "this owner's keyset has run out of key versions"


def exactly(text: str) -> str:
    return f"^{re.escape(text)}$"


def opens_to(keyset: OwnerKeyset, version: int, wrapped: bytes, data_key: DataKey) -> bool:
    return keyset.unwrap(version, wrapped, AAD)._raw == data_key._raw


# rotation
def test_a_rotation_adds_one_new_version_as_primary_and_keeps_the_others_keys():
    first = OwnerKeyset.generate(1)
    rotated = first.with_new_version(2)
    assert (rotated.primary, rotated.versions, first.versions) == (2, (1, 2), (1,))
    assert rotated.commitment(1, VAULT_ID) == first.commitment(1, VAULT_ID)
    data_key = DataKey.generate()
    assert opens_to(first, 1, rotated.single(1).wrap(data_key, AAD), data_key)


def test_a_rotation_may_take_the_last_version_a_keyring_can_hold():
    rotated = OwnerKeyset.generate(MAX_VERSION - 1).with_new_version(MAX_VERSION)
    assert (rotated.primary, rotated.versions) == (MAX_VERSION, (MAX_VERSION - 1, MAX_VERSION))


@pytest.mark.parametrize("version", [0, 1, 2, 3, MAX_VERSION + 1])
def test_a_rotation_never_takes_a_version_held_below_the_newest_or_past_the_last(version):
    keyset = OwnerKeyset(3, {1: bytes(range(32)), 3: bytes(range(32, 64))})
    before = keyset.commitment(3, VAULT_ID)
    with pytest.raises(KeyUnavailable, match=exactly(OUT_OF_VERSIONS)):
        keyset.with_new_version(version)
    assert (keyset.primary, keyset.versions, keyset.commitment(3, VAULT_ID)) == (3, (1, 3), before)


# commitments
def test_a_commitment_is_computed_once_per_version_and_vault():
    keyset = OwnerKeyset.generate().with_new_version(2)
    kept = keyset.commitment(1, VAULT_ID)
    assert keyset.commitment(1, VAULT_ID) is kept  # every put compares one: the same value, not computed again
    others = {keyset.commitment(2, VAULT_ID), keyset.commitment(1, b"v" * 16)}
    assert kept not in others and len(others) == 2


# the keyset of one version
def test_the_keyset_of_one_version_holds_that_version_alone_as_primary():
    keyset = OwnerKeyset.generate(1).with_new_version(2)
    one = keyset.single(1)
    assert one is not None
    assert (one.primary, one.versions) == (1, (1,))
    assert one.commitment(1, VAULT_ID) == keyset.commitment(1, VAULT_ID)
    data_key = DataKey.generate()
    assert opens_to(keyset, 1, one.wrap(data_key, AAD), data_key)


def test_the_keyset_of_a_version_not_held_is_none():
    assert OwnerKeyset.generate(1).with_new_version(3).single(2) is None


# unwrapping
def test_an_unwrap_under_a_version_not_held_is_refused_saying_so():
    keyset = OwnerKeyset.generate(2)
    wrapped = keyset.wrap(DataKey.generate(), AAD)
    for version in (1, 3):
        with pytest.raises(IntegrityError, match=exactly(NOT_HELD)):
            keyset.unwrap(version, wrapped, AAD)


@pytest.mark.parametrize("size", [0, WRAPPED_SIZE - 1, WRAPPED_SIZE + 1])
def test_a_wrapped_key_of_the_wrong_length_is_refused_before_it_is_opened(size):
    with pytest.raises(IntegrityError, match=exactly("wrapped data key has the wrong length")):
        OwnerKeyset.generate().unwrap(1, bytes(size), AAD)


# turn summary keys (format 2)
def test_a_turn_key_under_a_version_not_held_is_refused_saying_so():
    with pytest.raises(IntegrityError, match=exactly(NOT_HELD)):
        OwnerKeyset.generate(2).turn_key(1, VAULT_ID, TURN_TAG)


def test_a_turn_key_is_derived_once_and_kept():
    keyset = OwnerKeyset.generate().with_new_version(2)
    kept = keyset.turn_key(1, VAULT_ID, TURN_TAG)
    assert keyset.turn_key(1, VAULT_ID, TURN_TAG) is kept
    assert keyset.turn_key(2, VAULT_ID, TURN_TAG) is not kept


def test_the_turn_key_cache_is_emptied_when_full_never_grown_past_its_bound():
    keyset = OwnerKeyset.generate()
    first = keyset.turn_key(1, VAULT_ID, bytes(32))
    for number in range(1, DERIVED_KEY_CACHE_SIZE):
        keyset.turn_key(1, VAULT_ID, number.to_bytes(32, "big"))
    assert keyset.turn_key(1, VAULT_ID, bytes(32)) is first  # the cache holds DERIVED_KEY_CACHE_SIZE keys
    keyset.turn_key(1, VAULT_ID, DERIVED_KEY_CACHE_SIZE.to_bytes(32, "big"))  # one more: the cache is emptied first
    assert keyset.turn_key(1, VAULT_ID, bytes(32)) is not first


# format 3 keys: an owner version combined with an epoch key
def test_the_format_3_keys_under_a_version_not_held_are_refused_saying_so():
    with pytest.raises(IntegrityError, match=exactly(NOT_HELD)):
        OwnerKeyset.generate(2).epoch_keys(1, EpochKey.generate(), VAULT_ID, OWNER_TAG, (LENGTH, 5))


def test_the_format_3_keys_are_derived_once_per_epoch_key_and_name_it():
    keyset, epoch_key = OwnerKeyset.generate(), EpochKey.generate()
    kept = keyset.epoch_keys(1, epoch_key, VAULT_ID, OWNER_TAG, (LENGTH, 5))
    assert kept.epoch_key is epoch_key
    assert keyset.epoch_keys(1, epoch_key, VAULT_ID, OWNER_TAG, (LENGTH, 5)) is kept


def test_another_epoch_key_for_the_same_epoch_never_gets_the_keys_combined_with_the_one_before():
    keyset, replaced, current = OwnerKeyset.generate(), EpochKey.generate(), EpochKey.generate()
    old = keyset.epoch_keys(1, replaced, VAULT_ID, OWNER_TAG, (LENGTH, 5))
    new = keyset.epoch_keys(1, current, VAULT_ID, OWNER_TAG, (LENGTH, 5))
    assert new is not old and new.epoch_key is current
    wrapped = new.wrap(DataKey.generate(), AAD)
    with pytest.raises(IntegrityError):
        old.unwrap(wrapped, AAD)
    assert keyset.epoch_keys(1, current, VAULT_ID, OWNER_TAG, (LENGTH, 5)) is new


def test_the_format_3_key_cache_is_emptied_when_full_never_grown_past_its_bound():
    keyset, epoch_key = OwnerKeyset.generate(), EpochKey.generate()
    first = keyset.epoch_keys(1, epoch_key, VAULT_ID, OWNER_TAG, (LENGTH, 0))
    for epoch in range(1, DERIVED_KEY_CACHE_SIZE):
        keyset.epoch_keys(1, epoch_key, VAULT_ID, OWNER_TAG, (LENGTH, epoch))
    assert keyset.epoch_keys(1, epoch_key, VAULT_ID, OWNER_TAG, (LENGTH, 0)) is first
    keyset.epoch_keys(1, epoch_key, VAULT_ID, OWNER_TAG, (LENGTH, DERIVED_KEY_CACHE_SIZE))
    assert keyset.epoch_keys(1, epoch_key, VAULT_ID, OWNER_TAG, (LENGTH, 0)) is not first


# what it shows
def test_the_keyset_shows_its_versions_and_no_key_and_refuses_pickling_saying_why():
    keyset = OwnerKeyset(3, {1: bytes(range(32)), 3: bytes(range(32, 64))})
    assert repr(keyset) == "<OwnerKeyset primary=3 versions=[1, 3]>"
    with pytest.raises(TypeError, match=exactly("key material cannot be pickled")):
        pickle.dumps(keyset)
