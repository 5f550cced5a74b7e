"""Find inside a row: a literal query (never a pattern) searched chunk by chunk, in the row's units (characters for
text and JSON, bytes for binary), each match with a bounded context line.

Memory stays O(chunk): the search keeps only the current chunk plus what a match across its boundary, or the
context around one, still needs (the query's length and the context on either side). The search stops at the
first match past ``n`` (that one only says more matched), so a row with a million matches costs no more than its
chunks up to that point. The query is escaped before it is compiled, so matching is a plain substring search in
linear time (case-insensitive by choice, per character, so offsets stay those of the row).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from vault.errors import InvalidArgument

MAX_QUERY_CHARS = 200  # a query is a phrase to look for, not a document
MAX_MATCHES = 100  # matches one find returns at most
DEFAULT_MATCHES = 20
CONTEXT_UNITS = 80  # units of the match's line kept on each side of it


@dataclass(frozen=True, slots=True)
class FindRequest:
    """What to look for: ``query`` literally, ``ignore_case`` or not, up to ``n`` matches."""

    query: str
    n: int = DEFAULT_MATCHES
    ignore_case: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.query, str) or not 1 <= len(self.query) <= MAX_QUERY_CHARS:
            raise InvalidArgument(f"query must be a string of 1 to {MAX_QUERY_CHARS} characters")
        if "\x00" in self.query or any(0xD800 <= ord(c) <= 0xDFFF for c in self.query):
            raise InvalidArgument("query must not hold NUL or lone surrogates")
        if type(self.n) is not int or not 1 <= self.n <= MAX_MATCHES:
            raise InvalidArgument(f"n must be an integer from 1 to {MAX_MATCHES} for mode 'find'")
        if type(self.ignore_case) is not bool:
            raise InvalidArgument("ignore_case must be a boolean")


@dataclass(frozen=True, slots=True)
class Match:
    """One match: its offset in the row's units, and the line around it (at most ``CONTEXT_UNITS`` each side)."""

    offset: int
    line: str


@dataclass(frozen=True, slots=True)
class FindResult:
    """The matches of one find (in row order), whether more matched than were returned, and the row's size."""

    id: str
    content_kind: str
    matches: tuple[Match, ...]
    more: bool
    full_size: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form, suitable as a tool result (a binary row's lines are Base64)."""
        return {"id": self.id, "content_kind": self.content_kind, "mode": "find",
                "unit": "bytes" if self.content_kind == "binary" else "chars",
                "encoding": "base64" if self.content_kind == "binary" else "utf-8", "full_size": self.full_size,
                "matches": [{"offset": match.offset, "line": match.line} for match in self.matches],
                "more": self.more}

    def __repr__(self) -> str:
        return f"FindResult(id={self.id!r}, matches={len(self.matches)}, more={self.more})"


def find(pieces: Iterable[memoryview], kind: str, request: FindRequest, cap: int) -> tuple[tuple[Match, ...], bool]:
    """The first ``request.n`` matches in the row whose chunks ``pieces`` yields in order, their lines together
    at most ``cap`` units (the read cap), and whether more matched than were returned."""
    binary, flags = kind == "binary", re.IGNORECASE if request.ignore_case else 0
    needle = request.query.encode("utf-8")
    pattern: re.Pattern[Any] = re.compile(re.escape(needle), flags) if binary else re.compile(
        re.escape(request.query), flags)
    search = _Search(pattern, len(needle) if binary else len(request.query), request.n, binary, cap)
    for piece in pieces:
        if search.feed(bytes(piece) if binary else str(piece, "utf-8", "replace"), final=False):
            break
    else:
        search.feed(b"" if binary else "", final=True)
    return tuple(search.matches), search.more


class _Search:
    """The sliding window over a row's units: ``buffer`` starts at unit ``base``, matches are sought from
    ``position`` on; everything before ``position - CONTEXT_UNITS`` is dropped after each chunk."""

    def __init__(self, pattern: re.Pattern[Any], length: int, wanted: int, binary: bool, cap: int) -> None:
        self.pattern, self.length, self.wanted, self.binary, self.budget = pattern, length, wanted, binary, cap
        self.buffer: Any = b"" if binary else ""
        self.base = self.position = 0
        self.matches: list[Match] = []
        self.more = False

    def feed(self, units: Any, *, final: bool) -> bool:
        """Search what ``units`` completes; True once the answer is known (more than ``wanted`` matched)."""
        self.buffer += units
        # a match starting before ``limit`` is whole, with its after-context, unless more units may still come
        limit = len(self.buffer) if final else len(self.buffer) - (self.length - 1) - CONTEXT_UNITS
        while (found := self.pattern.search(self.buffer, self.position)) is not None and found.start() < limit:
            first, last = self._line(found.start(), found.end())
            if len(self.matches) == self.wanted or last - first > self.budget:
                self.more = True
                return True
            self.budget -= last - first
            line = self.buffer[first:last]
            self.matches.append(Match(self.base + found.start(), base64.b64encode(line).decode() if self.binary
                                      else line.rstrip("\r")))
            self.position = found.end()
        self.position = max(self.position, limit)
        keep = max(0, self.position - CONTEXT_UNITS)
        self.buffer, self.base, self.position = self.buffer[keep:], self.base + keep, self.position - keep
        return False

    def _line(self, start: int, end: int) -> tuple[int, int]:
        """Where the match's line lies in the buffer, cut at ``CONTEXT_UNITS`` on either side of the match."""
        newline: Any = b"\n" if self.binary else "\n"
        first = max(0, start - CONTEXT_UNITS)
        before = self.buffer.rfind(newline, first, start)
        last = min(len(self.buffer), end + CONTEXT_UNITS)
        after = self.buffer.find(newline, end, last)
        return (first if before < 0 else before + 1), (last if after < 0 else after)
