"""How observations become plaintext chunks: kinds, JSON text, and the cut into chunks of at most CHUNK_BYTES.

Binary chunks are exactly ``CHUNK_BYTES`` (the last may be shorter); text and JSON (stored as its JSON text) are
UTF-8 cut on character boundaries, so each chunk decodes alone. Each chunk's size in the row's units (characters,
or bytes for binary) goes into the metadata, which is how a slice finds its chunks without opening any other.
A row has at most ``max_chunks`` chunks, a limit the store declares.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from keys import CHUNK_BYTES
from vault.errors import InvalidArgument

_ASCII_BLOCK = 16 * CHUNK_BYTES  # ASCII text is encoded this much at a time (a multiple of CHUNK_BYTES)
MAX_JSON_DEPTH = 256
_INFINITIES = (float("inf"), float("-inf"))
MAX_JSON_TEXT = 256 * 1024 * 1024  # characters a JSON observation may take written out (larger: a stream)
_TOO_LONG = (f"observation would take more than {MAX_JSON_TEXT:,} characters written out as JSON (a part shared "
             "by reference many times?); store it as a stream instead")
_CONTINUATION = frozenset(range(0x80, 0xC0))
_SURROGATE = re.compile("[\ud800-\udfff]")


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
    return _SURROGATE.sub("\ufffd", text)


def encode_json(value: dict[str, Any] | list[Any]) -> str:
    """The JSON text stored for a structured observation; non-JSON values are InvalidArgument."""
    check_json_value(value)
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
        if _SURROGATE.search(text):
            text = json.dumps(value, ensure_ascii=True, allow_nan=False)  # escapes keep lone surrogates exact
    except (ValueError, RecursionError):  # e.g. an int longer than Python converts to text (4,300 digits)
        raise InvalidArgument("observation holds a value that cannot be written as JSON") from None
    return text


def check_json_value(value: object) -> None:
    """Walk a JSON value without recursion: str keys, finite numbers, depth at most MAX_JSON_DEPTH, no reference
    cycle, and at most MAX_JSON_TEXT characters once written out (estimated as it is walked). A tree (what
    json.loads makes) is walked once; a container met twice (shared by reference, or a cycle) sends the value to
    ``_check_shared``, which walks each container once: 60 levels of ``[x, x]`` are 120 objects but 2**60 values,
    and 2,000 references to one 1 MiB string are 2 GiB of text, each refused in time linear in the objects."""
    stack: list[tuple[object, int]] = [(value, 0)]
    met: set[int] = set()  # ids of the containers walked (all alive: ``value`` holds them)
    text = 0
    while stack:
        item, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise InvalidArgument(f"observation is nested deeper than {MAX_JSON_DEPTH} levels")
        if isinstance(item, dict):
            if id(item) in met:
                return _check_shared(value)
            met.add(id(item))
            text += 2 + 4 * len(item)
            for key, child in item.items():
                if not isinstance(key, str):
                    raise InvalidArgument("JSON object keys must be str")
                text += len(key)
                stack.append((child, depth + 1))
        elif isinstance(item, list):
            if id(item) in met:
                return _check_shared(value)
            met.add(id(item))
            text += 2 + len(item)
            stack.extend((child, depth + 1) for child in item)
        else:
            text += _scalar_text(item)
        if text > MAX_JSON_TEXT:
            raise InvalidArgument(_TOO_LONG)
    return None


def _check_shared(value: dict | list) -> None:
    """``check_json_value`` for a value that holds some container more than once: each container is walked once,
    and its written-out length and height (how deep it nests) are reused by every container that holds it."""
    written: dict[int, tuple[int, int]] = {}  # id of a finished container -> (written-out length, height)
    open_ids: set[int] = set()  # containers being walked: the path from the root
    stack: list[tuple[dict | list, int, bool]] = [(value, 0, False)]
    while stack:
        container, depth, finished = stack.pop()
        if finished:
            open_ids.discard(id(container))
            written[id(container)] = _written_size(container, written)
        elif id(container) not in written:
            open_ids.add(id(container))
            stack.append((container, depth, True))
            stack.extend((child, depth + 1, False) for child in _children(container, depth, open_ids, written))
    if written[id(value)][1] > MAX_JSON_DEPTH:  # the first path to a shared part need not be its deepest
        raise InvalidArgument(f"observation is nested deeper than {MAX_JSON_DEPTH} levels")


def _children(container: dict | list, depth: int, open_ids: set[int], written: dict[int, tuple[int, int]]) -> list:
    """The containers of ``container`` still to walk; its keys and scalars checked on the way."""
    if container and depth + 1 > MAX_JSON_DEPTH:
        raise InvalidArgument(f"observation is nested deeper than {MAX_JSON_DEPTH} levels")
    if isinstance(container, dict):
        if not all(isinstance(key, str) for key in container):
            raise InvalidArgument("JSON object keys must be str")
        values: Iterable[object] = container.values()
    else:
        values = container
    pending = []
    for child in values:
        if not isinstance(child, dict | list):
            _scalar_text(child)
        elif id(child) in open_ids:
            raise InvalidArgument("observation holds a reference cycle, which JSON cannot represent")
        elif id(child) not in written:
            pending.append(child)
    return pending


def _written_size(container: dict | list, written: dict[int, tuple[int, int]]) -> tuple[int, int]:
    """(written-out length, height) of ``container``, all of its containers already measured; a length over
    MAX_JSON_TEXT is refused."""
    if isinstance(container, dict):
        values: Iterable[object] = container.values()
        text = 2 + 4 * len(container) + sum(map(len, container))
    else:
        values, text = container, 2 + len(container)
    height = 0
    for child in values:
        if isinstance(child, dict | list):
            child_text, child_height = written[id(child)]
            text += child_text
            height = max(height, child_height + 1)
        else:
            text += _scalar_text(child)
            height = max(height, 1)
    if text > MAX_JSON_TEXT:
        raise InvalidArgument(_TOO_LONG)
    return text, height


def _scalar_text(item: object) -> int:
    """About how many characters a JSON scalar takes written out; anything else is InvalidArgument."""
    if isinstance(item, str):
        return len(item) + 2
    if isinstance(item, int):  # bool included
        return item.bit_length() // 3 + 2
    if isinstance(item, float):
        if item != item or item in _INFINITIES:
            raise InvalidArgument("observation holds a non-finite number, which JSON cannot represent")
        return 24
    if item is None:
        return 4
    raise InvalidArgument(f"observation holds a {type(item).__name__}, which is not a JSON value")


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
