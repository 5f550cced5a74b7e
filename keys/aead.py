"""AES-256-GCM, the one AEAD of scratchvault, and the only module that imports ``cryptography.hazmat``.

Everything above this file builds on :class:`Aead`; ``InvalidTag`` is translated to :class:`IntegrityError`
here, at the edge, so no caller can mistake a forgery for anything else. Nonce choice is the caller's
(see ``keys/envelope.py`` and threat_model.md, "Cryptography").
"""

from __future__ import annotations

import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from keys.errors import IntegrityError

KEY_SIZE = 32  # AES-256
NONCE_SIZE = 12  # 96-bit GCM nonce: the size GCM is specified and analysed for
TAG_SIZE = 16  # full 128-bit tag, never truncated


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

    def __reduce__(self) -> object:
        raise TypeError("key material cannot be pickled")
