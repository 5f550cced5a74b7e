"""What every sealed part of a row is bound to, and the clear columns a row's AADs name (every format)."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import NamedTuple, Protocol

# encode_fields of the clear columns when every field has its usual size (16-byte ids, 32-byte tags): the same
# bytes, built by one struct call instead of a loop (a listing builds one per row)
CLEAR = struct.Struct(">I16sI16sI32sI32sIdIQ")
CLEAR_WITH_VERSION = struct.Struct(">I16sI16sI32sI32sIdIQIQ")


@dataclass(slots=True)
class RowContext:
    """What every sealed part of a row is bound to: the vault and the row."""

    vault_id: bytes
    row_id: bytes


def usual_sizes(ctx: RowContext, owner_tag: bytes, turn_tag: bytes) -> bool:
    """Whether the ids are 16 bytes and the tags 32, so ``CLEAR`` packs the fields as ``encode_fields`` would."""
    return len(ctx.vault_id) == 16 and len(ctx.row_id) == 16 and len(owner_tag) == 32 and len(turn_tag) == 32


class SealedRow(Protocol):
    """A row's clear columns and sealed envelope, as a store returns them (the store's row type has these)."""

    row_id: bytes
    owner_tag: bytes
    turn_tag: bytes
    key_version: int
    expires_at: float
    size_bytes: int
    wrapped_key: bytes
    metadata: bytes


class RowColumns(Protocol):
    """The clear columns a format 3 seal reads of a row (a stored row, or the ``Columns`` of one being written)."""

    @property
    def row_id(self) -> bytes: ...

    @property
    def owner_tag(self) -> bytes: ...

    @property
    def turn_tag(self) -> bytes: ...

    @property
    def size_bytes(self) -> int: ...


class Columns(NamedTuple):
    """The clear columns of a row being written."""

    row_id: bytes
    owner_tag: bytes
    turn_tag: bytes
    size_bytes: int
