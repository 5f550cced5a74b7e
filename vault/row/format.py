"""The row's plaintext records: the metadata record (sealed under the row's data key) and the summary record
(sealed apart, under the turn summary key). Format 2 made both binary; format 1 (JSON) records are still read.
The sealing is in ``keys/recipe.py``.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Any

from vault.errors import IntegrityError

_TEXT_JSON = json.JSONEncoder(ensure_ascii=False)  # made once: json.dumps with options builds one per call
KINDS = ("text", "binary", "json")  # the order is part of the summary format (kind is stored by index)
# summary record format 2: format byte, step, size in units, created_at, kind, then three byte lengths
_SUMMARY_HEADER = struct.Struct(">BQQdBIII")
_SCAN_JSON = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # typeshed omits it (set in __init__)
# metadata record format 2: format byte, step, size in bytes and units, created_at, expires_at, kind, the byte
# lengths of user, actor, channel, turn and executor (actor and channel may be absent), the number of runs
_META_HEADER = struct.Struct(">BQQQddBIIIIII")
_NO_NAME = 0xFFFFFFFF
# a summary record's fields in SummaryRecord's order: step, executor, kind, size in units, created_at, summary,
# retained scalars (a listing builds its Representations from these without making the record)
SummaryFields = tuple[int, str, str, int, float, str, dict[str, Any]]


@dataclass(slots=True)
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
        [size, repeat] runs of two u32 (binary: every put writes one and every read parses one)."""
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
    def decode(cls, raw: bytes, max_chunks: int) -> Metadata:
        """Parse an authenticated record of format 2 (or 1: JSON, rows written before format 2); a shape we
        did not write is an IntegrityError."""
        try:
            metadata = cls._decode_v1(raw, max_chunks) if raw[:1] == b"{" else cls._decode_v2(raw, max_chunks)
        except (ValueError, TypeError, KeyError, AttributeError, IndexError, struct.error, RecursionError):
            raise IntegrityError("row metadata is not in a known format") from None
        if metadata.content_kind not in KINDS or sum(metadata.chunk_units) != metadata.size_units:
            raise IntegrityError("row metadata is inconsistent")
        return metadata

    @classmethod
    def _decode_v2(cls, raw: bytes, max_chunks: int) -> Metadata:
        (version, step, size_bytes, size_units, created, expires, kind, n_user, n_actor, n_channel, n_turn,
         n_executor, n_runs) = _META_HEADER.unpack_from(raw)
        if version != 2 or n_runs > max_chunks:
            raise ValueError("format")
        offset = _META_HEADER.size
        names: list[str | None] = []
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
        units = _expand([[flat[i], flat[i + 1]] for i in range(0, len(flat), 2)], max_chunks)
        return cls(user, actor, channel, turn, step, executor, KINDS[kind], size_bytes, size_units, units,
                   created, expires)

    @classmethod
    def _decode_v1(cls, raw: bytes, max_chunks: int) -> Metadata:
        fields = json.loads(raw)
        if fields.pop("format") != 1:
            raise ValueError("format")
        fields["chunk_units"] = _expand(fields["chunk_units"], max_chunks)
        metadata = cls(**fields)
        # the types format 2 enforces by construction; JSON enforces none of them
        if not (all(type(name) is str for name in (metadata.user_id, metadata.turn_id, metadata.executor_name))
                and all(name is None or type(name) is str for name in (metadata.actor, metadata.channel))
                and _is_count(metadata.step_num) and _is_count(metadata.size_bytes)
                and _is_count(metadata.size_units) and type(metadata.created_at) is float
                and type(metadata.expires_at) is float):
            raise ValueError("types")
        return metadata


@dataclass(slots=True)
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

    def matching(self, metadata: Metadata) -> SummaryRecord:
        """This record, once its step, executor, kind and size are checked against the row's metadata (sealed
        apart, so a summary of another row is an IntegrityError)."""
        if (self.step_num, self.executor_name, self.content_kind, self.size_units) != (
                metadata.step_num, metadata.executor_name, metadata.content_kind, metadata.size_units):
            raise IntegrityError("a row's summary does not match its metadata")
        return self

    def fields(self) -> SummaryFields:
        """The record's fields, in order."""
        return (self.step_num, self.executor_name, self.content_kind, self.size_units, self.created_at,
                self.summary, self.retained)

    def encode(self) -> bytes:
        """The record in format 2: a fixed binary header, then executor name, summary and retained scalars
        (JSON, empty when there are none) as UTF-8 (binary: a listing parses one per row)."""
        executor = self.executor_name.encode()
        summary = self.summary.encode("utf-8", "replace")
        retained = _TEXT_JSON.encode(self.retained).encode("utf-8", "replace") if self.retained else b""
        header = _SUMMARY_HEADER.pack(2, self.step_num, self.size_units, self.created_at,
                                      KINDS.index(self.content_kind), len(executor), len(summary), len(retained))
        return b"".join((header, executor, summary, retained))

    @classmethod
    def decode(cls, raw: bytes, legacy: bool = False) -> SummaryRecord:
        """Parse an authenticated record of format 2 (``legacy``: format 1); a shape we did not write is an
        IntegrityError."""
        return cls.decode_v1(raw) if legacy else cls(*summary_fields(raw))

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


def record_fields(raw: bytes, legacy: bool) -> SummaryFields:
    """The fields of a summary record of format 2 (``legacy``: format 1), in SummaryRecord's order."""
    if not legacy:
        return summary_fields(raw)
    return SummaryRecord.decode_v1(raw).fields()


def summary_fields(raw: bytes) -> SummaryFields:
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


def _expand(runs: object, max_chunks: int) -> tuple[int, ...]:
    """Inverse of :func:`_runs`; a shape we did not write is a ValueError (then an IntegrityError)."""
    if not isinstance(runs, list):
        raise ValueError("chunk runs")
    units: list[int] = []
    for run in runs:
        if not (isinstance(run, list) and len(run) == 2 and all(type(n) is int and n >= 0 for n in run)
                and 1 <= run[1] <= max_chunks - len(units)):
            raise ValueError("chunk run")
        units += [run[0]] * run[1]
    return tuple(units)
