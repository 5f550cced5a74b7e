"""Row format, plaintext side: how observations become chunks, the metadata record and the summary record.

Content is cut into chunks of at most ``CHUNK_BYTES`` of plaintext. Binary chunks are exactly that size (the
last may be shorter); text and JSON (stored as its JSON text) are UTF-8 cut on character boundaries, so each
chunk decodes alone. Each chunk's size in the row's units (characters, or bytes for binary) goes into the
metadata, which is how a slice finds its chunks without opening any other. Format 2 made the metadata and the
summary record binary (and moved the summary under the turn summary key); format 1 records are still read.
The sealing is in ``keys/``.
"""

from __future__ import annotations

import io
import json
import re
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from keys.envelope import MAX_CHUNKS
from keys.errors import IntegrityError, InvalidArgument

CHUNK_BYTES = 64 * 1024
_ASCII_BLOCK = 16 * CHUNK_BYTES  # ASCII text is encoded this much at a time (a multiple of CHUNK_BYTES)
# made once: json.dumps with non-default options builds a new encoder on every call
_COMPACT_JSON = json.JSONEncoder(separators=(",", ":"))
_TEXT_JSON = json.JSONEncoder(ensure_ascii=False)
KINDS = ("text", "binary", "json")  # the order is part of the summary format (kind is stored by index)
# summary record format 2: format byte, step, size in units, created_at, kind, then three byte lengths
_SUMMARY_HEADER = struct.Struct(">BQQdBIII")
_SCAN_JSON = json.JSONDecoder().scan_once
# metadata record format 2: format byte, step, size in bytes and units, created_at, expires_at, kind, the byte
# lengths of user, actor, channel, turn and executor (actor and channel may be absent), the number of runs
_META_HEADER = struct.Struct(">BQQQddBIIIIII")
_NO_NAME = 0xFFFFFFFF
MAX_JSON_DEPTH = 256
_CONTINUATION = frozenset(range(0x80, 0xC0))
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(slots=True)  # not frozen: made per row or chunk, and a frozen __init__ is slow
class Chunk:
    """One plaintext chunk, its size in units, and whether it is the row's last."""

    data: bytes | memoryview = field(repr=False)
    units: int
    last: bool


@dataclass(slots=True)  # not frozen: made per row or chunk, and a frozen __init__ is slow
class Metadata:
    """Everything about a row that is not content and not needed in clear; sealed with the row's DEK."""

    user_id: str
    actor: str | None
    channel: str | None
    turn_id: str
    step_num: int
    executor_name: str
    content_kind: str
    size_bytes: int
    size_units: int
    chunk_units: tuple[int, ...]
    created_at: float
    expires_at: float

    def __repr__(self) -> str:
        return f"<Metadata kind={self.content_kind} size_bytes={self.size_bytes} chunks={len(self.chunk_units)}>"

    def encode(self) -> bytes:
        """The record in format 2: a fixed binary header, the five names as UTF-8, then the chunk sizes as
        [size, repeat] runs of two u32. Binary rather than JSON: every put writes one and every read parses one,
        and this takes a tenth of the time."""
        user, turn, executor = self.user_id.encode(), self.turn_id.encode(), self.executor_name.encode()
        actor = b"" if self.actor is None else self.actor.encode()
        channel = b"" if self.channel is None else self.channel.encode()
        runs = [value for run in _runs(self.chunk_units) for value in run]
        header = _META_HEADER.pack(
            2, self.step_num, self.size_bytes, self.size_units, self.created_at, self.expires_at,
            KINDS.index(self.content_kind), len(user), _NO_NAME if self.actor is None else len(actor),
            _NO_NAME if self.channel is None else len(channel), len(turn), len(executor), len(runs) // 2)
        return b"".join((header, user, actor, channel, turn, executor, struct.pack(f">{len(runs)}I", *runs)))

    @classmethod
    def decode(cls, raw: bytes) -> Metadata:
        """Parse an authenticated record of format 2 (or 1: JSON, rows written before format 2); a shape we
        did not write is an IntegrityError."""
        try:
            metadata = cls._decode_v1(raw) if raw[:1] == b"{" else cls._decode_v2(raw)
        except (ValueError, TypeError, KeyError, AttributeError, IndexError, struct.error, RecursionError):
            raise IntegrityError("row metadata is not in a known format") from None
        if metadata.content_kind not in KINDS or sum(metadata.chunk_units) != metadata.size_units:
            raise IntegrityError("row metadata is inconsistent")
        return metadata

    @classmethod
    def _decode_v2(cls, raw: bytes) -> Metadata:
        (version, step, size_bytes, size_units, created, expires, kind, n_user, n_actor, n_channel, n_turn,
         n_executor, n_runs) = _META_HEADER.unpack_from(raw)
        if version != 2 or n_runs > MAX_CHUNKS:
            raise ValueError("format")
        offset = _META_HEADER.size
        names = []
        for size in (n_user, n_actor, n_channel, n_turn, n_executor):
            if size == _NO_NAME:
                names.append(None)
                continue
            end = offset + size
            if end > len(raw):
                raise ValueError("short")
            names.append(raw[offset:end].decode())
            offset = end
        user, actor, channel, turn, executor = names
        if user is None or turn is None or executor is None or offset + 8 * n_runs != len(raw):
            raise ValueError("shape")
        flat = struct.unpack_from(f">{2 * n_runs}I", raw, offset)
        units = _expand([[flat[i], flat[i + 1]] for i in range(0, len(flat), 2)])
        return cls(user, actor, channel, turn, step, executor, KINDS[kind], size_bytes, size_units, units,
                   created, expires)

    @classmethod
    def _decode_v1(cls, raw: bytes) -> Metadata:
        fields = json.loads(raw)
        if fields.pop("format") != 1:
            raise ValueError("format")
        fields["chunk_units"] = _expand(fields["chunk_units"])
        metadata = cls(**fields)
        # the types format 2 enforces by construction; JSON enforces none of them
        if not (all(type(name) is str for name in (metadata.user_id, metadata.turn_id, metadata.executor_name))
                and all(name is None or type(name) is str for name in (metadata.actor, metadata.channel))
                and _is_count(metadata.step_num) and _is_count(metadata.size_bytes)
                and _is_count(metadata.size_units) and type(metadata.created_at) is float
                and type(metadata.expires_at) is float):
            raise ValueError("types")
        return metadata


@dataclass(slots=True)  # not frozen: made per row or chunk, and a frozen __init__ is slow
class SummaryRecord:
    """What ``list_for_turn`` needs of a row, sealed apart from content and metadata."""

    step_num: int
    executor_name: str
    content_kind: str
    size_units: int
    created_at: float
    summary: str
    retained: dict[str, Any]

    def __repr__(self) -> str:
        return f"<SummaryRecord kind={self.content_kind} step={self.step_num}>"

    def encode(self) -> bytes:
        """The record in format 2: a fixed binary header, then executor name, summary and retained scalars
        (JSON, empty when there are none) as UTF-8. Binary rather than JSON because a listing parses one per
        row: this parses in about a microsecond, JSON in several."""
        executor = self.executor_name.encode()
        summary = self.summary.encode("utf-8", "replace")
        retained = _TEXT_JSON.encode(self.retained).encode("utf-8", "replace") if self.retained else b""
        header = _SUMMARY_HEADER.pack(2, self.step_num, self.size_units, self.created_at,
                                      KINDS.index(self.content_kind), len(executor), len(summary), len(retained))
        return b"".join((header, executor, summary, retained))

    @classmethod
    def decode(cls, raw: bytes) -> SummaryRecord:
        """Parse an authenticated format 2 record; a shape we did not write is an IntegrityError."""
        return cls(*summary_fields(raw))

    @classmethod
    def decode_v1(cls, raw: bytes) -> SummaryRecord:
        """Parse an authenticated format 1 record (JSON; rows written before format 2 still hold one)."""
        try:
            fields = json.loads(raw)
            if fields.pop("format") != 1:
                raise ValueError("format")
            record = cls(**fields)
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
            raise IntegrityError("row summary is not in a known format") from None
        # the types format 2 enforces by construction; JSON enforces none of them
        if not (_is_count(record.step_num) and _is_count(record.size_units) and type(record.created_at) is float
                and record.content_kind in KINDS and type(record.executor_name) is str
                and type(record.summary) is str and type(record.retained) is dict):
            raise IntegrityError("row summary is not in a known format")
        return record


def summary_fields(raw: bytes) -> tuple[int, str, str, int, float, str, dict[str, Any]]:
    """The fields of a format 2 summary record, in SummaryRecord's order (a listing takes them without making
    the record); a shape we did not write is an IntegrityError."""
    try:
        version, step, units, created, kind, n_exec, n_summary, n_retained = _SUMMARY_HEADER.unpack_from(raw)
        start = _SUMMARY_HEADER.size
        middle = start + n_exec
        end = middle + n_summary
        if version != 2 or end + n_retained != len(raw):
            raise ValueError("shape")
        retained: Any = {}
        if n_retained:
            text = raw[end:].decode()
            retained, stop = _SCAN_JSON(text, 0)  # the C scanner without json.loads' wrapping: one per row
            if stop != len(text) or type(retained) is not dict:
                raise ValueError("retained")
        return step, raw[start:middle].decode(), KINDS[kind], units, created, raw[middle:end].decode(), retained
    except (ValueError, IndexError, struct.error, RecursionError, StopIteration):
        raise IntegrityError("row summary is not in a known format") from None


def _is_count(value: object) -> bool:
    return type(value) is int and 0 <= value < 2**64


def _runs(units: tuple[int, ...]) -> list[list[int]]:
    """Chunk sizes as [size, repeat] runs: a 64 MiB row of equal chunks is two runs, not 1,024 numbers, so
    every read of it parses a few bytes of metadata instead of kilobytes."""
    runs: list[list[int]] = []
    for size in units:
        if runs and runs[-1][0] == size:
            runs[-1][1] += 1
        else:
            runs.append([size, 1])
    return runs


def _expand(runs: object) -> tuple[int, ...]:
    """Inverse of :func:`_runs`; a shape we did not write is a ValueError (then an IntegrityError)."""
    if not isinstance(runs, list):
        raise ValueError("chunk runs")
    units: list[int] = []
    for run in runs:
        if not (isinstance(run, list) and len(run) == 2 and all(type(n) is int and n >= 0 for n in run)
                and 1 <= run[1] <= MAX_CHUNKS - len(units)):
            raise ValueError("chunk run")
        units += [run[0]] * run[1]
    return tuple(units)


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
    """Walk a JSON value without recursion: str keys, finite numbers, bounded depth, nothing else."""
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise InvalidArgument(f"observation is nested deeper than {MAX_JSON_DEPTH} levels")
        if isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    raise InvalidArgument("JSON object keys must be str")
                stack.append((child, depth + 1))
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
        elif isinstance(item, float):
            if item != item or item in (float("inf"), float("-inf")):
                raise InvalidArgument("observation holds a non-finite number, which JSON cannot represent")
        elif item is not None and not isinstance(item, str | int):
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


def content_chunks(source: object, text: bool) -> Iterator[Chunk]:
    """The chunks of an observation: text (a str or a text stream) or binary (bytes-like or a binary stream)."""
    if text and isinstance(source, str) and source.isascii():  # isascii() of a str is O(1)
        return _ascii_chunks(source)
    return chunked(text_pieces(source) if text else binary_pieces(source), text)


def _ascii_chunks(text: str) -> Iterator[Chunk]:
    """The chunks :func:`chunked` cuts from ASCII text (one byte per character, so every cut is a character
    boundary and a chunk's units are its length), made without decoding each chunk to count its characters and
    without encoding the whole text at once: it is encoded ``_ASCII_BLOCK`` bytes at a time, so a large put
    neither doubles its memory nor pays the page faults of a fresh buffer its size."""
    if -(-len(text) // CHUNK_BYTES) > MAX_CHUNKS:
        raise InvalidArgument(f"observation is larger than {MAX_CHUNKS} chunks of {CHUNK_BYTES} bytes")
    for start in range(0, len(text) or 1, _ASCII_BLOCK):
        block = memoryview(text[start:start + _ASCII_BLOCK].encode("ascii"))
        for offset in range(0, len(block) or 1, CHUNK_BYTES):
            data = block[offset:offset + CHUNK_BYTES]
            yield Chunk(data, len(data), last=start + offset + CHUNK_BYTES >= len(text))


def chunked(pieces: Iterable[bytes | memoryview], text: bool) -> Iterator[Chunk]:
    """Re-cut pieces into chunks of at most CHUNK_BYTES (UTF-8 boundaries for text); always at least one."""
    cuts = iter(_cut(pieces, text))
    previous = next(cuts)
    for count, data in enumerate(cuts, start=1):
        if count >= MAX_CHUNKS:
            raise InvalidArgument(f"observation is larger than {MAX_CHUNKS} chunks of {CHUNK_BYTES} bytes")
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
