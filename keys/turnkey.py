"""The summary key of one owner's turn: listing a turn opens its summaries without unwrapping a key per row.

``summary key = HKDF-Expand(owner key version v, "scratchvault/turn-summary-key/v2" | vault_id | v | turn tag,
32)`` (one HMAC-SHA256 block; the owner key is uniformly random, so it serves as the PRK directly). A sealed
summary is ``0x04 || nonce (96 random bits) || AES-256-GCM(summary key, record, summary_aad_v2) || tag``.
threat_model.md ("Cryptography") gives the reasons and the nonce budget.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import NoReturn

from keys.aead import KEY_SIZE, NONCE_SIZE, TAG_SIZE, Aead, random_bytes
from keys.envelope import SUMMARY_V2, encode_fields
from keys.errors import IntegrityError

_INFO = b"scratchvault/turn-summary-key/v2"
_PREFIX = bytes([SUMMARY_V2])


def derive(owner_key: bytes, vault_id: bytes, version: int, turn_tag: bytes) -> TurnKey:
    """The summary key of ``turn_tag`` under owner key ``version`` (called by OwnerKeyset only). The version is
    in the info too, so two versions give two keys even if a keyring handed back one key under both."""
    if len(owner_key) != KEY_SIZE:
        raise IntegrityError("owner key has the wrong length")
    info = encode_fields(_INFO, vault_id, version.to_bytes(4, "big"), turn_tag) + b"\x01"
    return TurnKey(hmac.new(owner_key, info, hashlib.sha256).digest())


class TurnKey:
    """Seals and opens the summary records of one owner's turn under one key version."""

    __slots__ = ("_aead",)

    def __init__(self, raw: bytes) -> None:
        self._aead = Aead(raw)

    def seal_summary(self, plaintext: bytes, aad: bytes) -> bytes:
        """Seal a summary record under a fresh random 96-bit nonce (a record is sealed again on extension
        and rewrap, so the nonce cannot be fixed)."""
        return self._seal_with_nonce(random_bytes(NONCE_SIZE), plaintext, aad)

    def _seal_with_nonce(self, nonce: bytes, plaintext: bytes, aad: bytes) -> bytes:
        """Test seam for the frozen row-format vectors: the public path always draws ``nonce`` at random."""
        return _PREFIX + nonce + self._aead.seal(nonce, plaintext, aad)

    def open_summary(self, blob: bytes, aad: bytes) -> bytes:
        """Open a format 2 summary; a blob of another format, key, row or turn is an IntegrityError."""
        if len(blob) < 1 + NONCE_SIZE + TAG_SIZE or blob[0] != SUMMARY_V2:
            raise IntegrityError("ciphertext failed authentication")
        return self._aead.open(blob[1:1 + NONCE_SIZE], blob[1 + NONCE_SIZE:], aad)

    def __repr__(self) -> str:
        return "<TurnKey>"

    def __reduce__(self) -> NoReturn:
        raise TypeError("key material cannot be pickled")

