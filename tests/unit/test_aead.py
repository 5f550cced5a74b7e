"""keys/crypto/aead.py on its own: what AES-256-GCM and the block permutation refuse, and what they say.

Opening fails one way only: every refusal is the same IntegrityError with the same text, so no failure tells an
attacker which check stopped it (a padding-oracle-style distinction). Only 96-bit nonces are used, on both sides,
even though the library underneath accepts others.
"""

from __future__ import annotations

import re

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from keys.crypto.aead import Aead, BlockPermutation
from keys.errors import IntegrityError

KEY = bytes(range(32))
NONCE = bytes(12)
AAD = b"row aad"


def exactly(text: str) -> str:
    """A ``match=`` pattern for this whole text and nothing else."""
    return f"^{re.escape(text)}$"


ONE_FAILURE = exactly("ciphertext failed authentication")


def sealed_under_long_nonce() -> tuple[bytes, bytes]:
    """A ciphertext that authenticates under KEY with a 16-byte nonce, which AES-GCM itself accepts."""
    nonce = bytes(range(16))
    return nonce, AESGCM(KEY).encrypt(nonce, b"plaintext", AAD)


def test_open_refuses_a_nonce_other_than_96_bits_even_when_the_ciphertext_authenticates():
    nonce, sealed = sealed_under_long_nonce()
    with pytest.raises(IntegrityError, match=ONE_FAILURE):
        Aead(KEY).open(nonce, sealed, AAD)
    with pytest.raises(IntegrityError, match=ONE_FAILURE):
        Aead(KEY).open_into(nonce, sealed, AAD, memoryview(bytearray(len(sealed) - 16)))


def test_seal_refuses_a_nonce_other_than_96_bits_and_says_so():
    for size in (0, 8, 11, 13, 16):
        with pytest.raises(IntegrityError, match=exactly("nonce has the wrong length")):
            Aead(KEY).seal(bytes(size), b"plaintext", AAD)


def test_open_into_refuses_an_output_buffer_of_the_wrong_size_as_an_authentication_failure():
    sealed = Aead(KEY).seal(NONCE, b"plaintext", AAD)
    for size in (0, 8, 10, 25):
        with pytest.raises(IntegrityError, match=ONE_FAILURE):
            Aead(KEY).open_into(NONCE, sealed, AAD, memoryview(bytearray(size)))
    out = bytearray(9)
    Aead(KEY).open_into(NONCE, sealed, AAD, memoryview(out))
    assert bytes(out) == b"plaintext"


def test_every_way_opening_fails_is_one_error_with_one_text():
    aead = Aead(KEY)
    sealed = aead.seal(NONCE, b"plaintext", AAD)
    flipped = bytes([sealed[0] ^ 1]) + sealed[1:]
    failures = [
        (bytes(11), sealed, AAD),  # short nonce
        (NONCE, sealed[:15], AAD),  # shorter than a tag
        (NONCE, flipped, AAD),  # a changed byte
        (NONCE, sealed, b"other aad"),  # other associated data
        (bytes([1]) * 12, sealed, AAD),  # another nonce
    ]
    for nonce, data, aad in failures:
        with pytest.raises(IntegrityError, match=ONE_FAILURE):
            aead.open(nonce, data, aad)
        with pytest.raises(IntegrityError, match=ONE_FAILURE):
            aead.open_into(nonce, data, aad, memoryview(bytearray(max(len(data) - 16, 0))))
    with pytest.raises(IntegrityError, match=ONE_FAILURE):
        Aead(bytes(32)).open(NONCE, sealed, AAD)  # another key


def test_the_block_permutation_says_what_size_it_takes():
    permutation = BlockPermutation(KEY)
    for call in (permutation.encrypt, permutation.decrypt):
        for size in (0, 15, 17, 32):
            with pytest.raises(IntegrityError, match=exactly("a block must be 16 bytes")):
                call(bytes(size))
    with pytest.raises(IntegrityError, match=exactly("blocks must be a multiple of 16 bytes")):
        permutation.decrypt_each(bytes(33))
    blocks = bytes(range(48))
    assert permutation.decrypt_each(blocks) == b"".join(permutation.decrypt(blocks[i:i + 16]) for i in (0, 16, 32))

