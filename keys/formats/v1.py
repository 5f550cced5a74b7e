"""Row format 1: the data key wrapped under the owner key version alone; the metadata (every format) and the
summary of format 1 (still read, no longer written) sealed under the data key. threat_model.md, "Cryptography".

* Wrapped data key: ``nonce(12, random) || AES-256-GCM(owner key v, DEK(32)) || tag(16)`` = 60 bytes,
  aad = ``wrap_aad(ctx, user_id, key_version)``.
* Metadata: ``nonce(12) || AES-256-GCM(DEK, plaintext) || tag`` with ``nonce = 0x02 || 11 random bytes``,
  aad = ``meta_aad`` (binds the row's clear columns: owner tag, turn tag, expiry, size).
* Summary of format 1: like the metadata, nonce domain 0x03, aad = ``summary_aad``.

The domain byte keeps the deterministic chunk nonces (0x01, ``keys/formats/stream.py``) and the random nonces of
one DEK in disjoint sets, so a DEK never sees one nonce twice. Every aad starts with a label naming its purpose and
the format version, and encodes each field with a 4-byte length prefix (``keys/crypto/encoding.py``).
"""

from __future__ import annotations

import struct

from keys.crypto.aead import KEY_SIZE, NONCE_SIZE, TAG_SIZE, random_bytes
from keys.crypto.encoding import encode_fields, u64
from keys.crypto.labels import META_V1, SUMMARY_V1, WRAP_V1
from keys.errors import IntegrityError
from keys.formats.context import CLEAR, RowContext, usual_sizes

DOMAIN_META = 0x02
DOMAIN_SUMMARY = 0x03  # format 1 summaries under the DEK (read only)
WRAPPED_SIZE = NONCE_SIZE + KEY_SIZE + TAG_SIZE


def wrap_aad(ctx: RowContext, user_id: str, key_version: int) -> bytes:
    """AAD of a wrapped data key: the DEK only unwraps for this vault, row, owner and key version."""
    return encode_fields(WRAP_V1, ctx.vault_id, ctx.row_id, user_id.encode(), u64(key_version))


def meta_aad(ctx: RowContext, owner_tag: bytes, turn_tag: bytes, expires_at: float, size_bytes: int) -> bytes:
    """AAD of the metadata: binds the clear columns the store indexes and sweeps on."""
    return _clear_columns_aad(ctx, META_V1, owner_tag, turn_tag, expires_at, size_bytes)


def summary_aad(ctx: RowContext, owner_tag: bytes, turn_tag: bytes, expires_at: float, size_bytes: int) -> bytes:
    """AAD of the summary record: the same clear columns as the metadata, under its own label."""
    return _clear_columns_aad(ctx, SUMMARY_V1, owner_tag, turn_tag, expires_at, size_bytes)


def _clear_columns_aad(ctx: RowContext, label: bytes, owner_tag: bytes, turn_tag: bytes, expires_at: float,
                       size_bytes: int) -> bytes:
    if usual_sizes(ctx, owner_tag, turn_tag):
        return label + CLEAR.pack(16, ctx.vault_id, 16, ctx.row_id, 32, owner_tag, 32, turn_tag,
                                  8, expires_at, 8, size_bytes)
    return encode_fields(label, ctx.vault_id, ctx.row_id, owner_tag, turn_tag, struct.pack(">d", expires_at),
                         u64(size_bytes))


def random_nonce(domain: int) -> bytes:
    """Domain byte then 88 random bits: for the metadata, which may be sealed more than once under one DEK."""
    if domain != DOMAIN_META:  # the only part still sealed under a DEK with a random nonce
        raise IntegrityError("unknown nonce domain")
    return bytes([domain]) + random_bytes(NONCE_SIZE - 1)
