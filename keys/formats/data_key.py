"""The per-row data key (DEK) behind an opaque handle: ``vault/`` seals and opens through it, never sees bytes."""

from __future__ import annotations

from typing import NoReturn

from keys.crypto.aead import KEY_SIZE, NONCE_SIZE, Aead, random_bytes
from keys.errors import IntegrityError
from keys.formats.stream import chunk_nonce
from keys.formats.v1 import DOMAIN_META, DOMAIN_SUMMARY, random_nonce


class DataKey:
    """A random 256-bit key used for exactly one row: its chunks and its metadata (and the summary of a row
    written in format 1)."""

    __slots__ = ("_aead", "_raw")

    def __init__(self, raw: bytes) -> None:
        if len(raw) != KEY_SIZE:
            raise IntegrityError("data key has the wrong length")
        self._raw = bytes(raw)
        self._aead = Aead(self._raw)

    @classmethod
    def generate(cls) -> DataKey:
        """A fresh DEK from the OS CSPRNG."""
        return cls(random_bytes(KEY_SIZE))

    def seal_chunk(self, index: int, last: bool, plaintext: bytes | memoryview, aad: bytes) -> bytes:
        """Seal content chunk ``index``; the nonce is derived from its position, so nothing extra is stored."""
        return self._aead.seal(chunk_nonce(index, last), plaintext, aad)

    def open_chunk(self, index: int, last: bool, sealed: bytes, aad: bytes) -> bytes:
        """Open chunk ``index``; a chunk moved, dropped, reordered or cut short fails here."""
        return self._aead.open(chunk_nonce(index, last), sealed, aad)

    def open_chunk_into(self, index: int, last: bool, sealed: bytes, aad: bytes, out: memoryview) -> None:
        """Open chunk ``index`` straight into ``out`` (a slice of the caller's buffer: no extra copy)."""
        self._aead.open_into(chunk_nonce(index, last), sealed, aad, out)

    def seal_metadata(self, plaintext: bytes, aad: bytes) -> bytes:
        """Seal the row metadata with a fresh nonce in the metadata domain (it is re-sealed on extension)."""
        return self._seal_random(DOMAIN_META, plaintext, aad)

    def open_metadata(self, blob: bytes, aad: bytes) -> bytes:
        """Open the row metadata."""
        return self._open_random(DOMAIN_META, blob, aad)

    def open_summary(self, blob: bytes, aad: bytes) -> bytes:
        """Open a format 1 row summary (summaries are written under the turn summary key since format 2)."""
        return self._open_random(DOMAIN_SUMMARY, blob, aad)

    def _seal_random(self, domain: int, plaintext: bytes, aad: bytes) -> bytes:
        return self._seal_with_nonce(random_nonce(domain), plaintext, aad)

    def _seal_with_nonce(self, nonce: bytes, plaintext: bytes, aad: bytes) -> bytes:
        """Test seam for the frozen row-format vectors: the public path always draws ``nonce`` at random."""
        return nonce + self._aead.seal(nonce, plaintext, aad)

    def _open_random(self, domain: int, blob: bytes, aad: bytes) -> bytes:
        if len(blob) < NONCE_SIZE or blob[0] != domain:
            raise IntegrityError("ciphertext failed authentication")
        return self._aead.open(blob[:NONCE_SIZE], blob[NONCE_SIZE:], aad)

    def __repr__(self) -> str:
        return "<DataKey>"

    def __reduce__(self) -> NoReturn:
        raise TypeError("key material cannot be pickled")
