"""The content of a row as STREAM chunks under its data key (age's STREAM; threat_model.md, "Cryptography").

Chunk i of n: ``AES-256-GCM(DEK, chunk) || tag``, at most CHUNK_BYTES of plaintext, no stored nonce: the nonce is
``0x01 || i (10 bytes, big-endian) || last (0x01 if i == n-1 else 0x00)``, so a chunk moved, dropped, reordered or
cut short fails to open. The aad is ``chunk_aad(ctx, context_digest)``: every chunk is bound to its row and to the
row's immutable context. The domain byte 0x01 keeps these nonces apart from the random ones under the same DEK.
"""

from __future__ import annotations

import hashlib
import struct

from keys.crypto.encoding import encode_fields, u64
from keys.crypto.labels import CHUNK_V1, CONTEXT_V1
from keys.errors import IntegrityError
from keys.formats.context import RowContext

DOMAIN_CHUNK = 0x01
CHUNK_BYTES = 64 * 1024  # plaintext bytes per content chunk, at most
CHUNK_COUNTER_LIMIT = 1 << 80  # the nonce's 10-byte counter; each store declares its own, smaller, chunks per row
_LENGTH = struct.Struct(">I").pack
_CHUNK_FIELDS = struct.Struct(">I16sI16sI32s")
_STEP_LENGTH = struct.pack(">I", 8)


def chunk_nonce(index: int, last: bool) -> bytes:
    """STREAM nonce: domain byte, 80-bit big-endian counter, last-chunk flag."""
    if not 0 <= index < CHUNK_COUNTER_LIMIT:
        raise IntegrityError("chunk index out of range")
    return bytes([DOMAIN_CHUNK]) + index.to_bytes(10, "big") + (b"\x01" if last else b"\x00")


def chunk_aad(ctx: RowContext, context_digest: bytes) -> bytes:
    """AAD of every content chunk: this row and its immutable context (see context_digest); position is in
    the nonce."""
    if len(ctx.vault_id) == 16 and len(ctx.row_id) == 16 and len(context_digest) == 32:
        return CHUNK_V1 + _CHUNK_FIELDS.pack(16, ctx.vault_id, 16, ctx.row_id, 32, context_digest)
    return encode_fields(CHUNK_V1, ctx.vault_id, ctx.row_id, context_digest)


def context_digest(user_id: str, turn_id: str, step_num: int, executor_name: str, content_kind: str) -> bytes:
    """SHA-256 over the row's immutable context, so every chunk is bound to all of it. (The fields are joined
    here as ``encode_fields`` would join them: every put makes one.)"""
    user, turn, executor, kind = user_id.encode(), turn_id.encode(), executor_name.encode(), content_kind.encode()
    return hashlib.sha256(b"".join((
        CONTEXT_V1, _LENGTH(len(user)), user, _LENGTH(len(turn)), turn, _STEP_LENGTH, u64(step_num),
        _LENGTH(len(executor)), executor, _LENGTH(len(kind)), kind,
    ))).digest()
