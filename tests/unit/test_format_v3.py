"""Row format 3 on its own (keys/formats/v3.py): the key derivations take only key versions a keyring can hold, a
part too short for its header, nonce and tag names no epoch, a row is sealed only under the epoch its expiry falls
in, and the per-turn summary ciphers of one epoch are derived once and kept in a bounded cache."""

from __future__ import annotations

import re

import pytest

from keys.epochs.epoch_key import EpochKey
from keys.errors import IntegrityError, InvalidArgument
from keys.formats import v1
from keys.formats.context import Columns
from keys.formats.data_key import DataKey
from keys.formats.v3 import SUMMARY_V3, TURN_CIPHERS, WRAP_V3, row_epoch, seal_for_epoch, summary_key, wrap_key
from keys.keyring.entries import MAX_VERSION
from keys.owner_keyset import OwnerKeyset

PRK, VAULT_ID, OWNER_TAG, TURN_TAG = bytes(range(32)), bytes(16), b"o" * 32, b"t" * 32
LENGTH, EPOCH, EXPIRES = 3600, 2, 7205.0


def exactly(text: str) -> str:
    return f"^{re.escape(text)}$"


def epoch_keys():
    return OwnerKeyset.generate().epoch_keys(1, EpochKey.generate(), VAULT_ID, OWNER_TAG, (LENGTH, EPOCH))


@pytest.mark.parametrize("version", [0, -1, MAX_VERSION + 1, True, 1.0, "1"])
def test_a_key_version_no_keyring_holds_derives_no_key(version):
    with pytest.raises(InvalidArgument, match=exactly("a key version is out of range")):
        wrap_key(PRK, VAULT_ID, OWNER_TAG, version, LENGTH, EPOCH)
    with pytest.raises(InvalidArgument, match=exactly("a key version is out of range")):
        summary_key(PRK, VAULT_ID, version, TURN_TAG, LENGTH, EPOCH)


def test_the_first_and_last_key_versions_derive_distinct_keys():
    keys = {wrap_key(PRK, VAULT_ID, OWNER_TAG, version, LENGTH, EPOCH) for version in (1, 2, MAX_VERSION)}
    assert len(keys) == 3


@pytest.mark.parametrize("size", [0, 1, 4, 5, 9, 20, 32])
@pytest.mark.parametrize("prefix", [WRAP_V3, SUMMARY_V3])
def test_a_part_too_short_for_header_nonce_and_tag_names_no_epoch(size, prefix):
    blob = (bytes([prefix]) + LENGTH.to_bytes(4, "big") + bytes(40))[:size]
    with pytest.raises(IntegrityError, match=exactly("ciphertext failed authentication")):
        row_epoch(blob, prefix, EXPIRES)


def test_a_row_is_sealed_only_under_the_epoch_its_expiry_falls_in():
    keys, row = epoch_keys(), Columns(bytes(16), OWNER_TAG, TURN_TAG, 10)
    for expires_at in (EPOCH * LENGTH - 1.0, (EPOCH + 1) * LENGTH + 0.0):
        with pytest.raises(IntegrityError,
                           match=exactly("a row is sealed under an epoch its expiry does not fall in")):
            seal_for_epoch(keys, "alice", row, expires_at, DataKey.generate(), b"record")
    assert seal_for_epoch(keys, "alice", row, EPOCH * LENGTH + 0.0, DataKey.generate(), None)[1] is None


def test_the_turn_ciphers_of_an_epoch_are_derived_once_and_their_cache_is_bounded():
    keys = epoch_keys()
    assert keys.turn_cipher(TURN_TAG) is keys.turn_cipher(TURN_TAG)
    for n in range(TURN_CIPHERS + 1):
        keys.turn_cipher(n.to_bytes(32, "big"))
        assert len(keys._turns) <= TURN_CIPHERS


def test_only_the_metadata_is_sealed_under_a_random_nonce_of_a_data_key():
    assert v1.random_nonce(v1.DOMAIN_META)[0] == v1.DOMAIN_META
    for domain in (0x00, 0x01, v1.DOMAIN_SUMMARY, 0x04):
        with pytest.raises(IntegrityError, match=exactly("unknown nonce domain")):
            v1.random_nonce(domain)
