"""Row format 2: summaries under the summary key of one owner's turn, so a listing opens a turn's summaries without
unwrapping a data key per row (the data key is wrapped as in format 1). threat_model.md, "Cryptography".

* Summary: ``0x04 || nonce(12, random) || AES-256-GCM(turn summary key, record) || tag``, aad = ``summary_aad_v2``
  (the clear columns and the key version).
* Turn summary key: ``HKDF-Expand(owner key version v, fields("scratchvault/turn-summary-key/v2", vault_id, v (4
  bytes), turn tag), 32)``; the owner key is uniformly random, so it serves as the PRK directly, and the version is
  in the info too, so two versions give two keys even if a keyring handed back one key under both.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import NoReturn

from keys.crypto import kdf
from keys.crypto.aead import KEY_SIZE, NONCE_SIZE, TAG_SIZE, Aead, random_bytes
from keys.crypto.encoding import encode_fields, u32, u64
from keys.crypto.labels import SUMMARY_V2 as SUMMARY_V2_LABEL
from keys.crypto.labels import TURN_SUMMARY_KEY_V2
from keys.errors import IntegrityError
from keys.formats.context import CLEAR_WITH_VERSION, RowContext, usual_sizes

SUMMARY_V2 = 0x04  # first byte of a format 2 summary blob (under a turn summary key, not a DEK)
_PREFIX = bytes([SUMMARY_V2])
_LENGTH = struct.Struct(">I").pack
_TAIL = struct.Struct(">IdIQIQ")
_ROW_ID_LENGTH = _LENGTH(16)


def summary_aad_v2(ctx: RowContext, owner_tag: bytes, turn_tag: bytes, expires_at: float, size_bytes: int,
                   key_version: int) -> bytes:
    """AAD of a format 2 summary record: the clear columns and the owner key version its key comes from."""
    if usual_sizes(ctx, owner_tag, turn_tag):
        return SUMMARY_V2_LABEL + CLEAR_WITH_VERSION.pack(16, ctx.vault_id, 16, ctx.row_id, 32, owner_tag, 32,
                                                          turn_tag, 8, expires_at, 8, size_bytes, 8, key_version)
    return encode_fields(SUMMARY_V2_LABEL, ctx.vault_id, ctx.row_id, owner_tag, turn_tag,
                         struct.pack(">d", expires_at), u64(size_bytes), u64(key_version))


def summary_aads_v2(vault_id: bytes, owner_tag: bytes, turn_tag: bytes) -> Callable[[bytes, float, int, int], bytes]:
    """``summary_aad_v2`` for the rows of one turn, as a function of (row id, expiry, size, key version):
    a listing builds one AAD per row, and the parts shared by the whole turn are packed once."""
    if len(vault_id) != 16 or len(owner_tag) != 32 or len(turn_tag) != 32:
        return lambda row_id, expires_at, size_bytes, key_version: summary_aad_v2(
            RowContext(vault_id, row_id), owner_tag, turn_tag, expires_at, size_bytes, key_version)
    head = SUMMARY_V2_LABEL + _LENGTH(16) + vault_id
    middle = _LENGTH(32) + owner_tag + _LENGTH(32) + turn_tag
    tail = _TAIL.pack

    def aad(row_id: bytes, expires_at: float, size_bytes: int, key_version: int) -> bytes:
        if len(row_id) != 16:
            return summary_aad_v2(RowContext(vault_id, row_id), owner_tag, turn_tag, expires_at, size_bytes,
                                  key_version)
        return b"".join((head, _ROW_ID_LENGTH, row_id, middle, tail(8, expires_at, 8, size_bytes, 8, key_version)))

    return aad


def turn_summary_key(owner_key: bytes, vault_id: bytes, version: int, turn_tag: bytes) -> TurnKey:
    """The summary key of ``turn_tag`` under owner key ``version`` (called by OwnerKeyset only)."""
    if len(owner_key) != KEY_SIZE:
        raise IntegrityError("owner key has the wrong length")
    return TurnKey(kdf.expand(owner_key, encode_fields(TURN_SUMMARY_KEY_V2, vault_id, u32(version), turn_tag)))


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
