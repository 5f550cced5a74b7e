"""Slice arithmetic: which units a read returns, under the ``max_read`` cap, and which chunks hold them.

Units are characters for text and JSON, bytes for binary. The cap keeps the start of ``full`` and ``range``
requests and the end of ``tail`` requests, and says ``truncated=True`` whenever it cut something.
"""

from __future__ import annotations

import base64
import json
from bisect import bisect_right
from collections.abc import Generator, Iterable
from contextlib import closing
from dataclasses import dataclass
from itertools import accumulate
from typing import TYPE_CHECKING, Any

from vault.errors import IntegrityError

if TYPE_CHECKING:
    from keys import OpenedRow
    from vault.row.format import Metadata
    from vault.storage import Snapshot, StoredRow


@dataclass(slots=True)
class Slice:
    """Units [start, end) of the content, and whether the cap cut the request."""

    start: int
    end: int
    truncated: bool


def plan(mode: str, n: int, start: int | None, end: int | None, full_size: int, max_read: int) -> Slice:
    """The slice a validated request returns; an end past the content is clipped."""
    if mode == "full":
        first, last = 0, full_size
    elif mode == "head":
        first, last = 0, min(n, full_size)
    elif mode == "tail":
        first, last = full_size - min(n, full_size), full_size
    else:
        first = min(start or 0, full_size)
        last = full_size if end is None else min(end, full_size)
    if last - first <= max_read:
        return Slice(first, last, truncated=False)
    if mode == "tail":
        return Slice(last - max_read, last, truncated=True)
    return Slice(first, first + max_read, truncated=True)


def chunk_span(chunk_units: tuple[int, ...], start: int, end: int) -> tuple[int, int, int]:
    """(first chunk, last chunk inclusive, units before the first chunk) covering units [start, end)."""
    bounds = list(accumulate(chunk_units))  # bounds[i] = units up to the end of chunk i
    first = min(bisect_right(bounds, start), len(chunk_units) - 1)
    last = first if end <= start else min(bisect_right(bounds, end - 1), len(chunk_units) - 1)
    offset = bounds[first] - chunk_units[first]
    return first, last, offset


def joined(pieces: Iterable[memoryview], kind: str) -> Any:
    """A whole row's content from its opened chunks: bytes, str, or the JSON value. Text chunks are cut on
    character boundaries, so each decodes alone (no buffer of the whole row's bytes)."""
    if kind == "binary":
        return b"".join([bytes(piece) for piece in pieces])
    text = "".join([str(piece, "utf-8", "replace") for piece in pieces])
    if kind != "json":
        return text
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # authenticated, so written by a key holder, yet not JSON we would write
        raise IntegrityError("a row's JSON content does not parse") from None


def cut(pieces: Iterable[memoryview], kind: str, start: int, end: int) -> str:
    """Units [start, end) of the chunks a slice touches (counted from the first one's start): text, or Base64."""
    raw = bytearray()
    for piece in pieces:
        raw += piece
    if kind == "binary":
        return base64.b64encode(raw[start:end]).decode()
    return raw.decode("utf-8", "replace")[start:end]


def plaintexts(reads: Snapshot, row: StoredRow, opened: OpenedRow, metadata: Metadata, first: int,
               last: int) -> Generator[memoryview, None, None]:
    """Chunks first..last opened in order into one reused buffer (decode or copy each view before the next)."""
    with closing(reads.read_chunks(row, first, last)) as sealed:
        yield from opened.chunks(sealed, first, last, metadata)
