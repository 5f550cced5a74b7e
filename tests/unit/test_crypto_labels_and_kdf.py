"""The one HKDF, the field encoding and every domain-separation label, pinned to the bytes stored data depends on:
a label renamed or a derivation changed makes every stored row, commitment and tag unreadable."""

from __future__ import annotations

import hashlib
import hmac
import itertools

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

from keys.crypto import kdf, labels
from keys.crypto.encoding import encode_fields

PINNED = {
    "WRAP_V1": b"scratchvault/wrap/v1", "META_V1": b"scratchvault/meta/v1", "SUMMARY_V1": b"scratchvault/summary/v1",
    "CHUNK_V1": b"scratchvault/chunk/v1", "CONTEXT_V1": b"scratchvault/context/v1",
    "SUMMARY_V2": b"scratchvault/summary/v2", "TURN_SUMMARY_KEY_V2": b"scratchvault/turn-summary-key/v2",
    "WRAP_V3": b"scratchvault/wrap/v3", "SUMMARY_V3": b"scratchvault/summary/v3",
    "EPOCH_COMBINER": b"scratchvault/epoch-combiner/v1", "EPOCH_WRAP": b"scratchvault/epoch-wrap/v1",
    "EPOCH_SUMMARY": b"scratchvault/epoch-summary/v1", "EPOCH_CHECK_KEY": b"scratchvault/epoch-check-key/v1",
    "EPOCH_KEY_CHECK": b"scratchvault/epoch-key-check/v1",
    "OWNER_CHECK_KEY": b"scratchvault/key-check-key/v1", "OWNER_KEY_CHECK": b"scratchvault/key-check/v1",
    "OWNER_TAG": b"scratchvault/owner-tag/v1", "TURN_TAG": b"scratchvault/turn-tag/v1",
    "ROW_ID_KEY": b"scratchvault/row-id-key/v1", "LEDGER_KEY": b"scratchvault/deletion-ledger-key/v1",
    "LEDGER": b"scratchvault/deletions/v1", "AUDIT_KEY": b"scratchvault/audit-key/v1",
    "AUDIT_TAG": b"scratchvault/audit-tag/v1", "OWNER_NAME_KEY": b"scratchvault/owner-name-key/v1",
    "OWNER_NAME": b"scratchvault/owner-name/v1", "INDEX_KEY_CHECK": b"scratchvault/index-key-check/v1",
}
KEY = bytes(range(32))


def test_every_label_keeps_its_bytes_and_no_label_is_unpinned():
    defined = {name: value for name, value in vars(labels).items() if name.isupper()}
    assert defined == PINNED


def test_no_two_labels_are_equal_or_one_a_prefix_of_another():
    values = sorted(PINNED.values())
    assert len(set(values)) == len(values)
    assert not any(later.startswith(earlier) for earlier, later in itertools.pairwise(values))


@pytest.mark.parametrize("info", [b"", b"scratchvault/row-id-key/v1", bytes(200)])
def test_expand_is_rfc_5869_hkdf_expand_of_one_block(info):
    assert kdf.expand(KEY, info) == HKDFExpand(hashes.SHA256(), 32, info).derive(KEY)


def test_extract_is_hmac_of_the_input_key_under_the_salt():
    salt, input_key = labels.EPOCH_COMBINER, KEY + bytes(32)
    assert kdf.extract(salt, input_key) == hmac.new(salt, input_key, hashlib.sha256).digest()


def test_encoded_fields_carry_a_four_byte_length_each_so_no_two_lists_collide():
    assert encode_fields(b"L", b"ab", b"") == b"L" + b"\x00\x00\x00\x02ab" + b"\x00\x00\x00\x00"
    assert encode_fields(b"L", b"a", b"b") != encode_fields(b"L", b"ab") != encode_fields(b"L", b"", b"ab")
