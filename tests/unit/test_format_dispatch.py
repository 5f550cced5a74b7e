"""The one place that tells stored formats apart (keys/formats/dispatch.py), by first byte and length, and each
format refusing a blob of another: a tampered first byte or length is an IntegrityError, never a misread."""

from __future__ import annotations

import re

import pytest

from keys.epochs.epoch_key import EpochKey
from keys.epochs.schedule import MAX_EPOCH
from keys.errors import IntegrityError
from keys.formats.context import Columns, RowContext
from keys.formats.data_key import DataKey
from keys.formats.dispatch import stored_epoch, summary_format, wrapped_key_format
from keys.formats.v1 import DOMAIN_META, DOMAIN_SUMMARY, WRAPPED_SIZE, wrap_aad
from keys.formats.v2 import SUMMARY_V2, TurnKey
from keys.formats.v3 import SUMMARY_V3, WRAP_V3, WRAPPED_V3_SIZE, row_epoch, seal_for_epoch, wrap_aad_v3
from keys.owner_keyset import OwnerKeyset

VAULT_ID, ROW_ID, OWNER_TAG, TURN_TAG = bytes(16), bytes(range(16)), b"o" * 32, b"t" * 32
LENGTH, EXPIRES = 3600, 7200.0 + 5  # epoch 2 of one-hour epochs
ONE_FAILURE = f"^{re.escape('ciphertext failed authentication')}$"
WRONG_FORMAT = f"^{re.escape('wrapped data key has the wrong format')}$"
SUMMARY_MISSING = r"^a row's summary is missing$"
NO_VAULTS_EPOCH = f"^{re.escape('a row names an expiry epoch no vault makes')}$"


def test_the_sizes_of_the_two_wrapped_key_formats_are_60_and_65_bytes():
    assert (WRAPPED_SIZE, WRAPPED_V3_SIZE) == (60, 65)


@pytest.mark.parametrize(("blob", "expected"), [
    (bytes([WRAP_V3]) + bytes(64), 3),
    (bytes([WRAP_V3]) + bytes(63), 1),  # one byte short: not format 3, and format 1's unwrap refuses 64 bytes
    (bytes([WRAP_V3]) + bytes(65), 1),
    (bytes([0x04]) + bytes(64), 1),
    (bytes(60), 1),
])
def test_a_wrapped_key_is_format_3_only_at_exactly_65_bytes_starting_with_0x03(blob, expected):
    assert wrapped_key_format(blob) == expected


@pytest.mark.parametrize(("first", "expected"), [(SUMMARY_V3, 3), (SUMMARY_V2, 2), (0x03, 1), (0x02, 1), (0x00, 1)])
def test_a_summary_format_is_its_first_byte(first, expected):
    assert summary_format(bytes([first]) + bytes(40)) == expected


def test_an_empty_summary_is_an_integrity_error_not_format_1():
    with pytest.raises(IntegrityError, match=SUMMARY_MISSING):
        summary_format(b"")


def test_a_format_1_wrapped_key_of_another_length_is_refused_by_its_unwrap():
    keyset = OwnerKeyset.generate()
    aad = wrap_aad(RowContext(VAULT_ID, ROW_ID), "alice", 1)
    wrapped = keyset.wrap(DataKey.generate(), aad)
    assert keyset.unwrap(1, wrapped, aad)
    for damaged in (wrapped[:-1], wrapped + b"\x00"):
        with pytest.raises(IntegrityError):
            keyset.unwrap(1, damaged, aad)


def sealed_v3() -> tuple[bytes, bytes, object]:
    keys = OwnerKeyset.generate().epoch_keys(1, EpochKey.generate(), VAULT_ID, OWNER_TAG, (LENGTH, 2))
    wrapped, summary = seal_for_epoch(keys, "alice", Columns(ROW_ID, OWNER_TAG, TURN_TAG, 10), EXPIRES,
                                      DataKey.generate(), b"record")
    return wrapped, summary, keys


def test_a_format_3_row_names_its_epoch_by_its_header_and_expiry():
    wrapped, summary, _ = sealed_v3()
    assert wrapped_key_format(wrapped) == 3 and summary_format(summary) == 3
    assert stored_epoch(wrapped, EXPIRES) == (LENGTH, 2) and stored_epoch(bytes(60), EXPIRES) is None


def test_a_format_3_header_naming_another_length_or_format_fails():
    wrapped, summary, keys = sealed_v3()
    aad = wrap_aad_v3(RowContext(VAULT_ID, ROW_ID), "alice", 1, LENGTH, 2)
    assert keys.unwrap(wrapped, aad)
    other_length = wrapped[:1] + (LENGTH + 60).to_bytes(4, "big") + wrapped[5:]
    for damaged in (other_length, wrapped[:-1], wrapped + b"\x00"):
        with pytest.raises(IntegrityError, match=WRONG_FORMAT):
            keys.unwrap(damaged, aad)
    with pytest.raises(IntegrityError, match=ONE_FAILURE):
        keys.unwrap(bytes([SUMMARY_V3]) + wrapped[1:], aad)
    with pytest.raises(IntegrityError, match=NO_VAULTS_EPOCH):
        row_epoch(summary[:1] + (10).to_bytes(4, "big") + summary[5:], SUMMARY_V3, EXPIRES)  # no vault's length
    turn_aad = b"summary aad"
    with pytest.raises(IntegrityError, match=ONE_FAILURE):
        keys.open_summary(TURN_TAG, summary[:1] + (LENGTH + 60).to_bytes(4, "big") + summary[5:], turn_aad)


def test_an_expiry_past_the_last_epoch_a_store_holds_is_tampering_and_the_last_one_is_not():
    wrapped, _, _ = sealed_v3()
    for expires_at in (-1.0, float("inf"), float("nan"), 1e30):
        with pytest.raises(IntegrityError, match=NO_VAULTS_EPOCH):
            row_epoch(wrapped, WRAP_V3, expires_at)
    assert row_epoch(wrapped, WRAP_V3, MAX_EPOCH * LENGTH) == (LENGTH, MAX_EPOCH)
    with pytest.raises(IntegrityError, match=NO_VAULTS_EPOCH):
        row_epoch(wrapped, WRAP_V3, (MAX_EPOCH + 1) * LENGTH)


def test_an_empty_record_seals_and_opens_back_in_format_3():
    keys = OwnerKeyset.generate().epoch_keys(1, EpochKey.generate(), VAULT_ID, OWNER_TAG, (LENGTH, 2))
    sealed = keys.seal_summary(TURN_TAG, b"", b"aad")
    assert len(sealed) == 5 + 12 + 16 and keys.open_summary(TURN_TAG, sealed, b"aad") == b""


def test_a_data_key_opens_a_random_nonce_blob_only_in_its_own_nonce_domain():
    data_key = DataKey.generate()
    nonce = bytes([DOMAIN_SUMMARY]) + bytes(11)
    summary_domain = data_key._seal_with_nonce(nonce, b"record", b"aad")
    assert data_key.open_summary(summary_domain, b"aad") == b"record"
    with pytest.raises(IntegrityError, match=ONE_FAILURE):
        data_key.open_metadata(summary_domain, b"aad")
    metadata = data_key.seal_metadata(b"record", b"aad")
    assert metadata[0] == DOMAIN_META and data_key.open_metadata(metadata, b"aad") == b"record"
    with pytest.raises(IntegrityError, match=ONE_FAILURE):
        data_key.open_summary(metadata, b"aad")
    for short in (b"", bytes([DOMAIN_META]), metadata[:11]):
        with pytest.raises(IntegrityError, match=ONE_FAILURE):
            data_key.open_metadata(short, b"aad")


def test_a_format_2_summary_key_refuses_a_blob_of_another_first_byte():
    turn_key = TurnKey(bytes(32))
    sealed = turn_key.seal_summary(b"record", b"aad")
    assert turn_key.open_summary(sealed, b"aad") == b"record"
    with pytest.raises(IntegrityError):
        turn_key.open_summary(bytes([SUMMARY_V3]) + sealed[1:], b"aad")
