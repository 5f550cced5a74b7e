"""The row envelope: nonces and associated data for everything sealed in a row, in one place.

Layout, format version 1 (threat_model.md, "Cryptography", explains each choice):

* Wrapped data key: ``nonce(12, random) || AES-256-GCM(owner key v, DEK(32)) || tag(16)`` = 60 bytes,
  aad = ``wrap_aad(ctx, user_id, key_version)``.
* Content chunk i of n: ``AES-256-GCM(DEK, chunk) || tag``, no stored nonce; the nonce is STREAM-style,
  ``0x01 || i (10 bytes, big-endian) || last (0x01 if i == n-1 else 0x00)``, aad = ``chunk_aad(ctx, digest)``.
* Metadata: ``nonce(12) || AES-256-GCM(DEK, plaintext) || tag`` with ``nonce = 0x02 || 11 random bytes``,
  aad = ``meta_aad`` (binds the row's clear columns: owner tag, turn tag, expiry, size).
* Summary, written since format 2: ``0x04 || nonce(12, random) || AES-256-GCM(turn summary key, record) || tag``,
  aad = ``summary_aad_v2`` (the clear columns and the key version). The turn summary key is derived from the
  owner's key version and the turn tag (``keys/turnkey.py``), so a listing opens summaries without unwrapping
  one DEK per row.
* Summary of format 1 (still read, no longer written): like the metadata under the DEK, nonce domain 0x03,
  aad = ``summary_aad``.

The domain byte keeps the deterministic chunk nonces and the random nonces of one DEK in disjoint sets, so a
DEK never sees one nonce twice. Every aad starts with a label naming its purpose and the format version, and
encodes each field with a 4-byte length prefix, so no two different contexts serialise to the same bytes.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable
from dataclasses import dataclass

from keys.aead import NONCE_SIZE, random_bytes
from keys.errors import IntegrityError

FORMAT_VERSION = 1
_LENGTH = struct.Struct(">I").pack
DOMAIN_CHUNK = 0x01
DOMAIN_META = 0x02
DOMAIN_SUMMARY = 0x03  # format 1 summaries under the DEK (read only)
SUMMARY_V2 = 0x04  # first byte of a format 2 summary blob (under a turn summary key, not a DEK)
CHUNK_BYTES = 64 * 1024  # plaintext bytes per content chunk, at most
CHUNK_COUNTER_LIMIT = 1 << 80  # the nonce's 10-byte counter; each store declares its own, smaller, chunks per row


def encode_fields(label: bytes, *fields: bytes) -> bytes:
    """Unambiguous encoding: ``label || (len32 || field)*``."""
    parts = [label]
    for field in fields:
        parts.append(_LENGTH(len(field)))
        parts.append(field)
    return b"".join(parts)


@dataclass(slots=True)
class RowContext:
    """What every sealed part of a row is bound to: the vault and the row."""

    vault_id: bytes
    row_id: bytes


def _label(purpose: bytes) -> bytes:
    return b"scratchvault/" + purpose + b"/v%d" % FORMAT_VERSION


_WRAP, _META, _SUMMARY, _CHUNK, _CONTEXT = map(_label, (b"wrap", b"meta", b"summary", b"chunk", b"context"))
_SUMMARY_V2 = b"scratchvault/summary/v2"
# encode_fields of the clear columns when every field has its usual size (16-byte ids, 32-byte tags): the same
# bytes, built by one struct call instead of a loop (a listing builds one per row)
_CLEAR = struct.Struct(">I16sI16sI32sI32sIdIQ")
_CLEAR_V2 = struct.Struct(">I16sI16sI32sI32sIdIQIQ")
_TAIL_V2 = struct.Struct(">IdIQIQ")
_CHUNK_FIELDS = struct.Struct(">I16sI16sI32s")
_STEP_LENGTH = struct.pack(">I", 8)
_ROW_ID_LENGTH = _LENGTH(16)


def wrap_aad(ctx: RowContext, user_id: str, key_version: int) -> bytes:
    """AAD of a wrapped data key: the DEK only unwraps for this vault, row, owner and key version."""
    return encode_fields(_WRAP, ctx.vault_id, ctx.row_id, user_id.encode(), _u64(key_version))


def meta_aad(ctx: RowContext, owner_tag: bytes, turn_tag: bytes, expires_at: float, size_bytes: int) -> bytes:
    """AAD of the metadata: binds the clear columns the store indexes and sweeps on."""
    return _clear_columns_aad(ctx, _META, owner_tag, turn_tag, expires_at, size_bytes)


def summary_aad(ctx: RowContext, owner_tag: bytes, turn_tag: bytes, expires_at: float, size_bytes: int) -> bytes:
    """AAD of the summary record: the same clear columns as the metadata, under its own label."""
    return _clear_columns_aad(ctx, _SUMMARY, owner_tag, turn_tag, expires_at, size_bytes)


def summary_aad_v2(ctx: RowContext, owner_tag: bytes, turn_tag: bytes, expires_at: float, size_bytes: int,
                   key_version: int) -> bytes:
    """AAD of a format 2 summary record: the clear columns and the owner key version its key comes from."""
    if _usual_sizes(ctx, owner_tag, turn_tag):
        return _SUMMARY_V2 + _CLEAR_V2.pack(16, ctx.vault_id, 16, ctx.row_id, 32, owner_tag, 32, turn_tag,
                                            8, expires_at, 8, size_bytes, 8, key_version)
    return encode_fields(_SUMMARY_V2, ctx.vault_id, ctx.row_id, owner_tag, turn_tag, struct.pack(">d", expires_at),
                         _u64(size_bytes), _u64(key_version))


def summary_aads_v2(vault_id: bytes, owner_tag: bytes, turn_tag: bytes) -> Callable[[bytes, float, int, int], bytes]:
    """``summary_aad_v2`` for the rows of one turn, as a function of (row id, expiry, size, key version):
    a listing builds one AAD per row, and the parts shared by the whole turn are packed once."""
    if len(vault_id) != 16 or len(owner_tag) != 32 or len(turn_tag) != 32:
        return lambda row_id, expires_at, size_bytes, key_version: summary_aad_v2(
            RowContext(vault_id, row_id), owner_tag, turn_tag, expires_at, size_bytes, key_version)
    head = _SUMMARY_V2 + _LENGTH(16) + vault_id
    middle = _LENGTH(32) + owner_tag + _LENGTH(32) + turn_tag
    tail = _TAIL_V2.pack

    def aad(row_id: bytes, expires_at: float, size_bytes: int, key_version: int) -> bytes:
        if len(row_id) != 16:
            return summary_aad_v2(RowContext(vault_id, row_id), owner_tag, turn_tag, expires_at, size_bytes,
                                  key_version)
        return b"".join((head, _ROW_ID_LENGTH, row_id, middle, tail(8, expires_at, 8, size_bytes, 8, key_version)))

    return aad


def _clear_columns_aad(ctx: RowContext, label: bytes, owner_tag: bytes, turn_tag: bytes, expires_at: float,
                       size_bytes: int) -> bytes:
    if _usual_sizes(ctx, owner_tag, turn_tag):
        return label + _CLEAR.pack(16, ctx.vault_id, 16, ctx.row_id, 32, owner_tag, 32, turn_tag,
                                   8, expires_at, 8, size_bytes)
    return encode_fields(
        label, ctx.vault_id, ctx.row_id, owner_tag, turn_tag,
        struct.pack(">d", expires_at), _u64(size_bytes),
    )


def _usual_sizes(ctx: RowContext, owner_tag: bytes, turn_tag: bytes) -> bool:
    return len(ctx.vault_id) == 16 and len(ctx.row_id) == 16 and len(owner_tag) == 32 and len(turn_tag) == 32


def chunk_aad(ctx: RowContext, context_digest: bytes) -> bytes:
    """AAD of every content chunk: this row and its immutable context (see context_digest); position is in
    the nonce."""
    if len(ctx.vault_id) == 16 and len(ctx.row_id) == 16 and len(context_digest) == 32:
        return _CHUNK + _CHUNK_FIELDS.pack(16, ctx.vault_id, 16, ctx.row_id, 32, context_digest)
    return encode_fields(_CHUNK, ctx.vault_id, ctx.row_id, context_digest)


def context_digest(user_id: str, turn_id: str, step_num: int, executor_name: str, content_kind: str) -> bytes:
    """SHA-256 over the row's immutable context, so every chunk is bound to all of it. (The fields are joined
    here as ``encode_fields`` would join them: every put makes one.)"""
    user, turn, executor, kind = user_id.encode(), turn_id.encode(), executor_name.encode(), content_kind.encode()
    return hashlib.sha256(b"".join((
        _CONTEXT, _LENGTH(len(user)), user, _LENGTH(len(turn)), turn, _STEP_LENGTH, _u64(step_num),
        _LENGTH(len(executor)), executor, _LENGTH(len(kind)), kind,
    ))).digest()


def chunk_nonce(index: int, last: bool) -> bytes:
    """STREAM nonce: domain byte, 80-bit big-endian counter, last-chunk flag."""
    if not 0 <= index < CHUNK_COUNTER_LIMIT:
        raise IntegrityError("chunk index out of range")
    return bytes([DOMAIN_CHUNK]) + index.to_bytes(10, "big") + (b"\x01" if last else b"\x00")


def random_nonce(domain: int) -> bytes:
    """Domain byte then 88 random bits: for the metadata, which may be sealed more than once under one DEK."""
    if domain != DOMAIN_META:  # the only part still sealed under a DEK with a random nonce
        raise IntegrityError("unknown nonce domain")
    return bytes([domain]) + random_bytes(NONCE_SIZE - 1)


def _u64(value: int) -> bytes:
    return struct.pack(">Q", value)
