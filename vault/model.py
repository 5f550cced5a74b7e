"""The public value types: who asks (Principal) and what comes back (Representation, Record, ReadResult).

Their reprs name ids, kinds and sizes only: never content, summaries or owner names, so a stray log line or
traceback cannot leak what the vault protects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypedDict

from vault.errors import InvalidArgument
from vault.inputs import check_identifier, check_optional_identifier
from vault.row.format import Metadata, SummaryFields, SummaryRecord

ContentKind = str  # "text" | "binary" | "json"


class ReadWindow(TypedDict, total=False):
    """The keywords of ``Vault.read`` beyond mode and count: a range's bounds and the turn the row must be of."""

    start: int | None
    end: int | None
    turn_id: str | None


@dataclass(frozen=True, slots=True)
class Principal:
    """The user a call acts for, supplied by the runtime (never by the model). Ownership is by ``user_id``."""

    user_id: str
    actor: str | None = None
    channel: str | None = None

    def __post_init__(self) -> None:
        check_identifier(self.user_id, "user_id")
        check_optional_identifier(self.actor, "actor")
        check_optional_identifier(self.channel, "channel")

    def __repr__(self) -> str:
        return "Principal(<redacted>)"


def check_principal(principal: object) -> None:
    """A Principal (the runtime's, never the model's); anything else is the caller's bug."""
    if not isinstance(principal, Principal):
        raise InvalidArgument(f"principal must be a Principal, not {type(principal).__name__}")


@dataclass(frozen=True, slots=True)
class Representation:
    """What a model may see of a stored observation: id, kind, size, summary, hint and a few scalars."""

    id: str
    content_kind: ContentKind
    size_bytes: int
    summary: str
    ref_hint: str
    step_num: int
    executor_name: str
    created_at: float
    expires_at: float
    retained: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form, ready to go into the model's context."""
        return {
            "id": self.id,
            "content_kind": self.content_kind,
            "size_bytes": self.size_bytes,
            "summary": self.summary,
            "ref_hint": self.ref_hint,
            "step_num": self.step_num,
            "executor_name": self.executor_name,
            "expires_at": self.expires_at,
            "retained": dict(self.retained),
        }

    def __repr__(self) -> str:
        return f"Representation(id={self.id!r}, content_kind={self.content_kind!r}, size_bytes={self.size_bytes})"


# A listing makes thousands: their slots are set through the slot descriptors, not through the frozen
# dataclass __init__'s object.__setattr__ for each field; the result is an ordinary frozen Representation.
_NEW = object.__new__
(_ID, _KIND, _SIZE, _SUMMARY, _HINT, _STEP, _EXECUTOR, _CREATED, _EXPIRES, _RETAINED) = (
    getattr(Representation, name).__set__ for name in Representation.__dataclass_fields__)


def representation(row_id: bytes, size_bytes: int, expires_at: float, fields: SummaryFields) -> Representation:
    """What the model sees of a row (how the vault builds every Representation): its clear columns, its summary
    record's fields, and the hint that tells the model how to read more."""
    step_num, executor_name, content_kind, size_units, created_at, summary, retained = fields
    row = row_id.hex()
    unit = "bytes" if content_kind == "binary" else "chars"
    rep = _NEW(Representation)
    _ID(rep, row)
    _KIND(rep, content_kind)
    _SIZE(rep, size_bytes)
    _SUMMARY(rep, summary)
    _HINT(rep, f'Call scratchpad_read with {{"id": "{row}", "mode": "head", "n": 2000}} (or "tail", or "range" '
               f'with start/end) to read a slice; the full content is {size_units:,} {unit}.')
    _STEP(rep, step_num)
    _EXECUTOR(rep, executor_name)
    _CREATED(rep, created_at)
    _EXPIRES(rep, expires_at)
    _RETAINED(rep, retained)
    return rep


@dataclass(frozen=True, slots=True)
class Record:
    """A complete stored row, content decrypted: str for text, bytes for binary, the JSON value for json."""

    id: str
    owner: Principal
    turn_id: str
    step_num: int
    executor_name: str
    content_kind: ContentKind
    content: Any
    size_bytes: int
    summary: str
    retained: dict[str, Any]
    created_at: float
    expires_at: float
    key_version: int

    def __repr__(self) -> str:
        return f"Record(id={self.id!r}, content_kind={self.content_kind!r}, size_bytes={self.size_bytes})"


@dataclass(frozen=True, slots=True)
class ReadResult:
    """A slice: ``content`` (str; Base64 for binary) and sizes in the row's units (chars, or bytes for binary)."""

    id: str
    content: str
    content_kind: ContentKind
    mode: str
    full_size: int
    returned_size: int
    truncated: bool
    start: int
    end: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form, suitable as a tool result."""
        return {
            "id": self.id,
            "content": self.content,
            "content_kind": self.content_kind,
            "encoding": "base64" if self.content_kind == "binary" else "utf-8",
            "mode": self.mode,
            "unit": "bytes" if self.content_kind == "binary" else "chars",
            "full_size": self.full_size,
            "returned_size": self.returned_size,
            "start": self.start,
            "end": self.end,
            "truncated": self.truncated,
        }

    def __repr__(self) -> str:
        return (f"ReadResult(id={self.id!r}, mode={self.mode!r}, full_size={self.full_size}, "
                f"returned_size={self.returned_size}, truncated={self.truncated})")


def full_record(row_id: bytes, key_version: int, metadata: Metadata, summary: SummaryRecord, content: Any) -> Record:
    """The Record of a row whose metadata and summary were opened and checked against each other."""
    return Record(
        id=row_id.hex(), owner=Principal(metadata.user_id, metadata.actor, metadata.channel),
        turn_id=metadata.turn_id, step_num=metadata.step_num, executor_name=metadata.executor_name,
        content_kind=metadata.content_kind, content=content, size_bytes=metadata.size_bytes,
        summary=summary.summary, retained=summary.retained, created_at=metadata.created_at,
        expires_at=metadata.expires_at, key_version=key_version)
