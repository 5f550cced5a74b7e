"""How observations become plaintext chunks: kinds, JSON text, and the cut into chunks of at most CHUNK_BYTES.

Binary chunks are exactly ``CHUNK_BYTES`` (the last may be shorter); text and JSON (stored as its JSON text) are
UTF-8 cut on character boundaries, so each chunk decodes alone. Each chunk's size in the row's units (characters,
or bytes for binary) goes into the metadata, which is how a slice finds its chunks without opening any other.
A row has at most ``max_chunks`` chunks, a limit the store declares. JSON values are checked and written in
``json_values.py``.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from keys import CHUNK_BYTES
from vault.errors import InvalidArgument

_ASCII_BLOCK = 16 * CHUNK_BYTES  # ASCII text is encoded this much at a time (a multiple of CHUNK_BYTES)
_CONTINUATION = frozenset(range(0x80, 0xC0))
SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(slots=True)
class Chunk:
    """One plaintext chunk, its size in units, and whether it is the row's last."""

    data: bytes | memoryview = field(repr=False)
    units: int
    last: bool




def classify(observation: object) -> str:
    """The content kind of an observation, or InvalidArgument for a type the vault does not store."""
    if isinstance(observation, str):
        return "text"
    if isinstance(observation, bytes | bytearray | memoryview):
        return "binary"
    if isinstance(observation, dict | list):
        return "json"
    if isinstance(observation, io.TextIOBase):
        return "text"
    try:
        readable = isinstance(observation, io.IOBase) or callable(getattr(observation, "read", None))
    except Exception:  # a caller's object may raise anything from its attributes
        readable = False
    if readable:
        return "binary"  # a readable binary stream; a text stream that is not TextIOBase is refused on read
    raise InvalidArgument(
        f"observation must be str, bytes-like, a dict or list of JSON values, or a readable file, "
        f"not {type(observation).__name__}"
    )


def encode_text(text: str) -> bytes:
    """UTF-8 of ``text``; lone surrogates (which UTF-8 cannot hold) become U+FFFD, one for one."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return clean_text(text).encode("utf-8")


def clean_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (character offsets unchanged)."""
    return SURROGATE.sub("\ufffd", text)


def text_pieces(observation: object) -> Iterator[bytes | memoryview]:
    """UTF-8 pieces of a str or a text stream (read in bounded pieces, never whole)."""
    if isinstance(observation, str):
        yield memoryview(encode_text(observation))
        return
    while True:
        piece = _read(observation, CHUNK_BYTES // 4)
        if not piece:
            return
        if not isinstance(piece, str):
            raise InvalidArgument("a text stream returned something other than str")
        yield encode_text(piece)


def binary_pieces(observation: object) -> Iterator[bytes | memoryview]:
    """Byte pieces of a bytes-like object or a binary stream (read in bounded pieces, never whole)."""
    if isinstance(observation, bytes | bytearray | memoryview):
        yield byte_view(observation)
        return
    while True:
        piece = _read(observation, CHUNK_BYTES)
        if not isinstance(piece, bytes | bytearray | memoryview):
            raise InvalidArgument("a binary stream returned something other than bytes")
        view = byte_view(piece)
        if not view:
            return
        yield view


def byte_view(buffer: bytes | bytearray | memoryview) -> memoryview:
    """A flat view of unsigned bytes over any bytes-like object (copied only when not contiguous)."""
    try:
        view = memoryview(buffer)
        return view.cast("B") if view.c_contiguous else memoryview(view.tobytes())
    except (ValueError, TypeError):  # e.g. a released memoryview
        raise InvalidArgument("observation is not a usable bytes-like object") from None


def _read(stream: Any, size: int) -> Any:
    try:
        return stream.read(size)
    except Exception as error:  # a caller's stream may raise anything; it must not escape as itself
        raise InvalidArgument(f"reading the observation stream failed ({type(error).__name__})") from None


def content_chunks(source: object, text: bool, max_chunks: int) -> Iterator[Chunk]:
    """The chunks of an observation: text (a str or a text stream) or binary (bytes-like or a binary stream)."""
    if text and isinstance(source, str) and source.isascii():  # isascii() of a str is O(1)
        return _ascii_chunks(source, max_chunks)
    return chunked(text_pieces(source) if text else binary_pieces(source), text, max_chunks)


def _ascii_chunks(text: str, max_chunks: int) -> Iterator[Chunk]:
    """The chunks :func:`chunked` cuts from ASCII text (one byte per character, so every cut is a character
    boundary and a chunk's units are its length), made without decoding each chunk to count its characters and
    without encoding the whole text at once: it is encoded ``_ASCII_BLOCK`` bytes at a time, so a large put
    neither doubles its memory nor pays the page faults of a fresh buffer its size."""
    if -(-len(text) // CHUNK_BYTES) > max_chunks:
        raise InvalidArgument(f"observation is larger than {max_chunks} chunks of {CHUNK_BYTES} bytes")
    for start in range(0, len(text) or 1, _ASCII_BLOCK):
        block = memoryview(text[start:start + _ASCII_BLOCK].encode("ascii"))
        for offset in range(0, len(block) or 1, CHUNK_BYTES):
            data = block[offset:offset + CHUNK_BYTES]
            yield Chunk(data, len(data), last=start + offset + CHUNK_BYTES >= len(text))


def chunked(pieces: Iterable[bytes | memoryview], text: bool, max_chunks: int) -> Iterator[Chunk]:
    """Re-cut pieces into chunks of at most CHUNK_BYTES (UTF-8 boundaries for text); always at least one."""
    cuts = iter(_cut(pieces, text))
    previous = next(cuts)
    for count, data in enumerate(cuts, start=1):
        if count >= max_chunks:
            raise InvalidArgument(f"observation is larger than {max_chunks} chunks of {CHUNK_BYTES} bytes")
        yield Chunk(previous, _units(previous, text), last=False)
        previous = data
    yield Chunk(previous, _units(previous, text), last=True)


def _cut(pieces: Iterable[bytes | memoryview], text: bool) -> Iterator[bytes | memoryview]:
    """Full chunks as soon as more than one chunk is pending; the rest once the pieces end."""
    pending = bytearray()
    emitted = False
    for piece in pieces:
        view = byte_view(piece)
        if pending:  # only streams leave a remainder; their pieces are small, so this copy is bounded
            view = memoryview(bytes(pending) + view)
            pending.clear()
        offset = 0
        while len(view) - offset > CHUNK_BYTES:
            end = _boundary(view, offset + CHUNK_BYTES) if text else offset + CHUNK_BYTES
            yield view[offset:end]
            emitted = True
            offset = end
        pending += view[offset:]
    if pending or not emitted:
        yield bytes(pending)


def _boundary(view: memoryview, end: int) -> int:
    """The largest index <= end that starts a UTF-8 character (never cuts a multi-byte sequence)."""
    while view[end] in _CONTINUATION:
        end -= 1
    return end


def _units(data: bytes | memoryview, text: bool) -> int:
    """Bytes for binary; characters for UTF-8 text (decoding is the fast way to count them)."""
    return len(str(data, "utf-8")) if text else len(data)
