"""The row envelope: nonces and associated data for everything sealed in a row, in one place.

Layout, format version 1 (threat_model.md, "Cryptography", explains each choice):

* Wrapped data key: ``nonce(12, random) || AES-256-GCM(owner key v, DEK(32)) || tag(16)`` = 60 bytes,
  aad = ``wrap_aad(ctx, user_id, key_version)``.
* Content chunk i of n: ``AES-256-GCM(DEK, chunk) || tag``, no stored nonce; the nonce is STREAM-style,
  ``0x01 || i (10 bytes, big-endian) || last (0x01 if i == n-1 else 0x00)``, aad = ``chunk_aad(ctx, digest)``.
* Metadata / summary: ``nonce(12) || AES-256-GCM(DEK, plaintext) || tag`` with
  ``nonce = domain (0x02 metadata, 0x03 summary) || 11 random bytes``, aad = ``meta_aad`` / ``summary_aad``
  (both bind the row's clear columns: owner tag, turn tag, expiry, size).

The domain byte keeps the deterministic chunk nonces and the random nonces of one DEK in disjoint sets, so a
DEK never sees one nonce twice. Every aad starts with a label naming its purpose and the format version, and
encodes each field with a 4-byte length prefix, so no two different contexts serialise to the same bytes.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass

from keys.aead import NONCE_SIZE, random_bytes
from keys.errors import IntegrityError

FORMAT_VERSION = 1
_LENGTH = struct.Struct(">I").pack
DOMAIN_CHUNK = 0x01
DOMAIN_META = 0x02
DOMAIN_SUMMARY = 0x03
MAX_CHUNKS = 1 << 20  # the chunk counter is far wider; this bound comes from the store's chunk keys


def encode_fields(label: bytes, *fields: bytes) -> bytes:
    """Unambiguous encoding: ``label || (len32 || field)*``."""
    parts = [label]
    for field in fields:
        parts.append(_LENGTH(len(field)))
        parts.append(field)
    return b"".join(parts)


@dataclass(slots=True)  # not frozen: made per row or chunk, and a frozen __init__ is slow
class RowContext:
    """What every sealed part of a row is bound to: the vault and the row."""

    vault_id: bytes
    row_id: bytes



def _label(purpose: bytes) -> bytes:
    return b"scratchvault/" + purpose + b"/v%d" % FORMAT_VERSION


_WRAP, _META, _SUMMARY, _CHUNK, _CONTEXT = map(_label, (b"wrap", b"meta", b"summary", b"chunk", b"context"))


def wrap_aad(ctx: RowContext, user_id: str, key_version: int) -> bytes:
    """AAD of a wrapped data key: the DEK only unwraps for this vault, row, owner and key version."""
    return encode_fields(_WRAP, ctx.vault_id, ctx.row_id, user_id.encode(), _u64(key_version))


def meta_aad(ctx: RowContext, owner_tag: bytes, turn_tag: bytes, expires_at: float, size_bytes: int) -> bytes:
    """AAD of the metadata: binds the clear columns the store indexes and sweeps on."""
    return _clear_columns_aad(ctx, _META, owner_tag, turn_tag, expires_at, size_bytes)


def summary_aad(ctx: RowContext, owner_tag: bytes, turn_tag: bytes, expires_at: float, size_bytes: int) -> bytes:
    """AAD of the summary record: the same clear columns as the metadata, under its own label."""
    return _clear_columns_aad(ctx, _SUMMARY, owner_tag, turn_tag, expires_at, size_bytes)


def _clear_columns_aad(ctx: RowContext, label: bytes, owner_tag: bytes, turn_tag: bytes, expires_at: float,
                       size_bytes: int) -> bytes:
    return encode_fields(
        label, ctx.vault_id, ctx.row_id, owner_tag, turn_tag,
        struct.pack(">d", expires_at), _u64(size_bytes),
    )


def chunk_aad(ctx: RowContext, context_digest: bytes) -> bytes:
    """AAD of every content chunk: this row and its immutable context (see context_digest); position is in
    the nonce."""
    return encode_fields(_CHUNK, ctx.vault_id, ctx.row_id, context_digest)


def context_digest(user_id: str, turn_id: str, step_num: int, executor_name: str, content_kind: str) -> bytes:
    """SHA-256 over the row's immutable context, so every chunk is bound to all of it."""
    return hashlib.sha256(
        encode_fields(
            _CONTEXT,
            user_id.encode(), turn_id.encode(), _u64(step_num), executor_name.encode(), content_kind.encode(),
        )
    ).digest()


def chunk_nonce(index: int, last: bool) -> bytes:
    """STREAM nonce: domain byte, 80-bit big-endian counter, last-chunk flag."""
    if not 0 <= index < MAX_CHUNKS:
        raise IntegrityError("chunk index out of range")
    return bytes([DOMAIN_CHUNK]) + index.to_bytes(10, "big") + (b"\x01" if last else b"\x00")


def random_nonce(domain: int) -> bytes:
    """Domain byte then 88 random bits: for parts that may be sealed more than once under one DEK."""
    if domain not in (DOMAIN_META, DOMAIN_SUMMARY):
        raise IntegrityError("unknown nonce domain")
    return bytes([domain]) + random_bytes(NONCE_SIZE - 1)


def _u64(value: int) -> bytes:
    return struct.pack(">Q", value)
