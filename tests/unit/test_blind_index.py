"""The index key's outputs that no vector file pins (keys/blind_index.py; threat_model.md, "Row ids"): audit tags
and sealed owner-registry names, each recomputed here from HKDF, HMAC and AES-GCM without the module's own
helpers, so a dropped field, label or subkey changes the answer; the registry's refusals (another vault, another
owner's tag, a name that is not its tag's, bytes that are not UTF-8) with their exact texts; a listing's batch of
ids read back unsigned over the whole 64-bit seq; and the bounded tag cache, which computes a tag once and empties
when it holds TAG_CACHE_SIZE tags.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Callable

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

from keys.blind_index import TAG_CACHE_SIZE, IndexKey
from keys.crypto import kdf
from keys.errors import IntegrityError

RAW = bytes(range(32))
VAULT_ID = bytes(range(16))
OTHER_VAULT_ID = bytes(range(1, 17))
NONCE = bytes(range(100, 112))
FAILED_AUTHENTICATION = "ciphertext failed authentication"


def exactly(text: str) -> str:
    return f"^{re.escape(text)}$"


def subkey(label: bytes) -> bytes:
    return HKDFExpand(hashes.SHA256(), 32, label).derive(RAW)


def fields(label: bytes, *values: bytes) -> bytes:
    """The field encoding written out: the label, then each value after its 4-byte big-endian length."""
    return label + b"".join(len(value).to_bytes(4, "big") + value for value in values)


def expected_audit_tag(kind: bytes, value: bytes) -> str:
    message = fields(b"scratchvault/audit-tag/v1", kind, value)
    return hmac.new(subkey(b"scratchvault/audit-key/v1"), message, hashlib.sha256).digest()[:16].hex()


def name_cipher() -> AESGCM:
    return AESGCM(subkey(b"scratchvault/owner-name-key/v1"))


def registry_aad(vault_id: bytes, owner_tag: bytes) -> bytes:
    return fields(b"scratchvault/owner-name/v1", vault_id, owner_tag)


def sealed_entry(vault_id: bytes, owner_tag: bytes, name: bytes) -> bytes:
    """A registry entry sealed here, as seal_name's layout says: nonce, then AES-GCM of the name."""
    return NONCE + name_cipher().encrypt(NONCE, name, registry_aad(vault_id, owner_tag))


# -- audit tags ---------------------------------------------------------------------------------------------------
def test_an_audit_tag_is_hmac_of_label_kind_and_value_under_the_audit_subkey():
    index = IndexKey(RAW)
    assert index.audit_tag("user", "alice") == expected_audit_tag(b"user", b"alice")
    assert index.audit_tag("actor", "alice") == expected_audit_tag(b"actor", b"alice")
    assert index.audit_tag("user", "alice") != index.audit_tag("actor", "alice")
    assert len(index.audit_tag("user", "")) == 32 and index.audit_tag("user", "") == expected_audit_tag(b"user", b"")


def test_an_audit_tag_of_a_lone_surrogate_tags_its_surrogatepass_bytes():
    index = IndexKey(RAW)
    assert index.audit_tag("turn", "a\ud800") == expected_audit_tag(b"turn", b"a\xed\xa0\x80")
    assert index.audit_tag("turn", "a\ud800") != index.audit_tag("turn", "a")


# -- the owner registry -------------------------------------------------------------------------------------------
def test_a_registry_entry_is_aes_gcm_under_the_name_subkey_bound_to_the_vault_and_the_tag():
    index = IndexKey(RAW)
    tag = index.owner_tag("alice")
    assert index.open_name(VAULT_ID, tag, sealed_entry(VAULT_ID, tag, b"alice")) == "alice"
    sealed = index.seal_name(VAULT_ID, tag, "alice")
    assert len(sealed) == 12 + 5 + 16
    assert name_cipher().decrypt(sealed[:12], sealed[12:], registry_aad(VAULT_ID, tag)) == b"alice"


def test_a_registry_entry_sealed_for_one_vault_does_not_open_in_another():
    index = IndexKey(RAW)
    tag = index.owner_tag("alice")
    with pytest.raises(IntegrityError, match=exactly(FAILED_AUTHENTICATION)):
        index.open_name(OTHER_VAULT_ID, tag, index.seal_name(VAULT_ID, tag, "alice"))


def test_a_registry_entry_moved_to_another_owners_tag_fails_authentication():
    index = IndexKey(RAW)
    alice, bob = index.owner_tag("alice"), index.owner_tag("bob")
    with pytest.raises(IntegrityError, match=exactly(FAILED_AUTHENTICATION)):
        index.open_name(VAULT_ID, bob, index.seal_name(VAULT_ID, alice, "alice"))


def test_a_registry_entry_whose_name_is_not_its_tags_is_refused():
    index = IndexKey(RAW)
    bob = index.owner_tag("bob")
    with pytest.raises(IntegrityError, match=exactly("an owner registry entry does not match its tag")):
        index.open_name(VAULT_ID, bob, index.seal_name(VAULT_ID, bob, "alice"))


def test_an_authenticated_registry_entry_that_is_not_utf8_is_an_integrity_error():
    index = IndexKey(RAW)
    tag = index.owner_tag("alice")
    with pytest.raises(IntegrityError, match=exactly("an owner registry entry is not UTF-8")):
        index.open_name(VAULT_ID, tag, sealed_entry(VAULT_ID, tag, b"alic\xff"))


# -- row ids ------------------------------------------------------------------------------------------------------
def test_a_row_id_of_the_wrong_length_is_refused_with_its_text():
    index = IndexKey(RAW)
    with pytest.raises(IntegrityError, match=exactly("a stored row id has the wrong length")):
        index.row_seqs([index.row_id(1), bytes(15)])


def test_a_listings_batch_reads_seqs_unsigned_up_to_the_largest_64_bit_seq():
    index = IndexKey(RAW)
    seqs = [0, 1 << 63, (1 << 64) - 1]
    ids = [index.row_id(seq) for seq in seqs]
    assert index.row_seqs(ids) == seqs == [index.row_seq(row_id) for row_id in ids]


# -- the tag cache ------------------------------------------------------------------------------------------------
@pytest.fixture
def macs_computed(monkeypatch: pytest.MonkeyPatch) -> Callable[[], int]:
    """How many HMACs keys.crypto.kdf has computed since the fixture was set up (the real HMAC, counted)."""
    computed = [0]
    real_mac = kdf.mac

    def counted_mac(key: bytes, message: bytes) -> bytes:
        computed[0] += 1
        return real_mac(key, message)

    monkeypatch.setattr(kdf, "mac", counted_mac)
    return lambda: computed[0]


def test_an_owner_or_turn_tag_asked_again_is_computed_once(macs_computed: Callable[[], int]):
    index = IndexKey(RAW)
    before = macs_computed()
    owner = index.owner_tag("alice")
    turn = index.turn_tag(owner, "t1")
    assert macs_computed() - before == 2
    assert [index.owner_tag("alice"), index.turn_tag(owner, "t1")] == [owner, turn]
    assert macs_computed() - before == 2


def test_the_tag_cache_keeps_tag_cache_size_tags_and_empties_at_the_next(macs_computed: Callable[[], int]):
    index = IndexKey(RAW)
    first = index.owner_tag("owner-0")
    for number in range(1, TAG_CACHE_SIZE):
        index.owner_tag(f"owner-{number}")
    before = macs_computed()
    assert index.owner_tag("owner-0") == first and macs_computed() == before  # still one of TAG_CACHE_SIZE
    index.owner_tag(f"owner-{TAG_CACHE_SIZE}")  # one more: the cache empties, then holds only it
    assert macs_computed() == before + 1
    assert index.owner_tag("owner-0") == first and macs_computed() == before + 2
