"""The content of a row as STREAM chunks under its data key (age's STREAM; threat_model.md, "Cryptography").

Chunk i of n: ``AES-256-GCM(DEK, chunk) || tag``, at most CHUNK_BYTES of plaintext, no stored nonce: the nonce is
``0x01 || i (10 bytes, big-endian) || last (0x01 if i == n-1 else 0x00)``, so a chunk moved, dropped, reordered or
cut short fails to open. The aad is ``chunk_aad(ctx, context_digest)``: every chunk is bound to its row and to the
row's immutable context. The domain byte 0x01 keeps these nonces apart from the random ones under the same DEK.

``ChunkWriter`` and ``ChunkReader`` own every check of a row's chunk sequence: a row can't end without a marked
chunk, has no chunk after it, and reads back each chunk asked for exactly once, in order, at its recorded size.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Iterator
from typing import Protocol

from keys.crypto.aead import TAG_SIZE
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


class ChunkCipher(Protocol):
    """What the chunk writer and reader need of a row's data key (``keys/formats/data_key.py``)."""

    def seal_chunk(self, index: int, last: bool, plaintext: bytes | memoryview, aad: bytes) -> bytes: ...

    def open_chunk_into(self, index: int, last: bool, sealed: bytes, aad: bytes, out: memoryview) -> None: ...


class ChunkWriter:
    """Seals one row's chunks in order, each exactly once, the last one marked and none after it."""

    __slots__ = ("_aad", "_cipher", "_next", "ended")

    def __init__(self, cipher: ChunkCipher, aad: bytes) -> None:
        self._cipher, self._aad = cipher, aad
        self._next, self.ended = 0, False

    def seal(self, data: bytes | memoryview, last: bool) -> bytes:
        """Seal the next chunk; its position and whether it is the last are in its nonce."""
        if self.ended:
            raise IntegrityError("a row has no chunk after its last")
        sealed = self._cipher.seal_chunk(self._next, last, data, self._aad)
        self._next += 1
        self.ended = last
        return sealed


class ChunkReader:
    """Opens a span of one row's chunks; ``units`` are the chunks' recorded sizes (each checked exactly when
    ``exact_sizes``: binary content), and the last of them is the marked one."""

    __slots__ = ("_aad", "_cipher", "_exact_sizes", "_units")

    def __init__(self, cipher: ChunkCipher, aad: bytes, units: tuple[int, ...], exact_sizes: bool) -> None:
        self._cipher, self._aad, self._units, self._exact_sizes = cipher, aad, units, exact_sizes

    def open(self, sealed: Iterable[tuple[int, bytes]], first: int, last: int) -> Iterator[memoryview]:
        """Open chunks ``first..last`` from ``sealed`` (index, blob) pairs in order, each into one reused buffer:
        a view is valid only until the next is asked for. A missing, extra, moved or resized chunk is an
        IntegrityError; so is a chunk of another row, context or position (its AAD or nonce differs)."""
        final = len(self._units) - 1
        buffer = memoryview(bytearray(CHUNK_BYTES))
        expected = first
        for index, blob in sealed:
            if index != expected:
                raise IntegrityError("a content chunk is missing")
            if index > last:  # a store that hands out more than was asked for: never read past the slice
                raise IntegrityError("a content chunk is extra")
            size = len(blob) - TAG_SIZE
            if not 0 <= size <= CHUNK_BYTES or (self._exact_sizes and size != self._units[index]):
                raise IntegrityError("a content chunk has the wrong size")
            out = buffer[:size]
            self._cipher.open_chunk_into(index, index == final, blob, self._aad, out)
            yield out
            expected += 1
        if expected != last + 1:
            raise IntegrityError("a content chunk is missing")
