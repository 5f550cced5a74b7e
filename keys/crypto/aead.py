"""AES-256-GCM, the one AEAD of scratchvault, and the only module that imports ``cryptography.hazmat``.

Everything above this file builds on :class:`Aead`; ``InvalidTag`` is translated to :class:`IntegrityError`
here, at the edge, so no caller can mistake a forgery for anything else. Nonce choice is the caller's
(see ``keys/formats/v1.py`` and threat_model.md, "Cryptography"). :class:`BlockPermutation` is AES-256 on one
16-byte block, nothing more: row ids (``keys/blind_index.py``, threat_model.md, "Row ids").
"""

from __future__ import annotations

import os
import threading
from typing import NoReturn

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from keys.errors import IntegrityError

KEY_SIZE = 32  # AES-256
NONCE_SIZE = 12  # 96-bit GCM nonce: the size GCM is specified and analysed for
TAG_SIZE = 16  # full 128-bit tag, never truncated
BLOCK_SIZE = 16  # one AES block


def random_bytes(size: int) -> bytes:
    """Return ``size`` bytes from the OS CSPRNG (keys, row ids and random nonces all come from here)."""
    return os.urandom(size)


class Aead:
    """AES-256-GCM under one key: ``seal``/``open`` with an explicit 96-bit nonce and associated data."""

    __slots__ = ("_cipher",)

    def __init__(self, key: bytes) -> None:
        if len(key) != KEY_SIZE:
            raise IntegrityError("AES-256-GCM key has the wrong length")
        self._cipher = AESGCM(bytes(key))

    def seal(self, nonce: bytes, plaintext: bytes | memoryview, aad: bytes) -> bytes:
        """Encrypt and authenticate; returns ciphertext followed by the 16-byte tag."""
        if len(nonce) != NONCE_SIZE:
            raise IntegrityError("nonce has the wrong length")
        return self._cipher.encrypt(nonce, plaintext, aad)

    def open(self, nonce: bytes, sealed: bytes | memoryview, aad: bytes) -> bytes:
        """Authenticate then decrypt; any mismatch (key, nonce, aad, bytes, length) is one IntegrityError."""
        if len(nonce) != NONCE_SIZE or len(sealed) < TAG_SIZE:
            raise IntegrityError("ciphertext failed authentication")
        try:
            return self._cipher.decrypt(nonce, sealed, aad)
        except InvalidTag:
            raise IntegrityError("ciphertext failed authentication") from None

    def open_into(self, nonce: bytes, sealed: bytes | memoryview, aad: bytes, out: memoryview) -> None:
        """Like :meth:`open`, writing the plaintext into ``out`` (exactly ``len(sealed) - 16`` bytes)."""
        if len(nonce) != NONCE_SIZE or len(sealed) < TAG_SIZE or len(out) != len(sealed) - TAG_SIZE:
            raise IntegrityError("ciphertext failed authentication")
        try:
            self._cipher.decrypt_into(nonce, sealed, aad, out)
        except InvalidTag:
            raise IntegrityError("ciphertext failed authentication") from None

    def __repr__(self) -> str:
        return "<Aead AES-256-GCM>"

    def __reduce__(self) -> NoReturn:
        raise TypeError("key material cannot be pickled")


class BlockPermutation:
    """AES-256 as a pseudorandom permutation of single 16-byte blocks, under one key.

    Only ever one block per call, so no mode of operation is involved: ECB here is the block cipher itself,
    not a way of encrypting messages. It gives no integrity: a caller must check what it decrypts."""

    __slots__ = ("_decrypt", "_encrypt", "_lock")

    def __init__(self, key: bytes) -> None:
        if len(key) != KEY_SIZE:
            raise IntegrityError("AES-256 key has the wrong length")
        # ECB on one block at a time is the bare block cipher (a PRP), not a mode for messages: see above
        cipher = Cipher(algorithms.AES(bytes(key)), modes.ECB())  # noqa: S305  # nosec B305
        # one long-lived context each way, made once; a lock, since a context is stateful
        self._encrypt, self._decrypt = cipher.encryptor(), cipher.decryptor()
        self._lock = threading.Lock()

    def encrypt(self, block: bytes) -> bytes:
        """The image of one 16-byte block."""
        if len(block) != BLOCK_SIZE:
            raise IntegrityError("a block must be 16 bytes")
        with self._lock:
            return self._encrypt.update(block)

    def decrypt(self, block: bytes) -> bytes:
        """The preimage of one 16-byte block (any 16 bytes have one: nothing is authenticated here)."""
        if len(block) != BLOCK_SIZE:
            raise IntegrityError("a block must be 16 bytes")
        with self._lock:
            return self._decrypt.update(block)

    def decrypt_each(self, blocks: bytes) -> bytes:
        """The preimages of consecutive 16-byte blocks, each on its own (the same as :meth:`decrypt` of each),
        in one call (a listing checks every id it shows)."""
        if len(blocks) % BLOCK_SIZE:
            raise IntegrityError("blocks must be a multiple of 16 bytes")
        with self._lock:
            return self._decrypt.update(blocks)

    def __repr__(self) -> str:
        return "<BlockPermutation AES-256>"

    def __reduce__(self) -> NoReturn:
        raise TypeError("key material cannot be pickled")
