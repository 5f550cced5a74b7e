"""Edits of one part of a row that every store's attacker makes the same way, through its own ``read`` and
``write`` (tests/attacks/sqlite_attacker.py, tests/attacks/postgres_attacker.py)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

COLUMNS = ("id", "owner_tag", "turn_tag", "key_version", "expires_at", "size_bytes", "wrapped_key", "metadata")


class PartEdits:
    """Bit flips and swaps of a row's parts: ``row`` columns, ``summary``, or ``chunk`` ``index``."""

    def read(self, seq: int, part: str, chunk: int | None = None) -> object:
        raise NotImplementedError

    def write(self, seq: int, part: str, value: object, chunk: int | None = None) -> None:
        raise NotImplementedError

    def flip(self, seq: int, part: str, at: float = 0.5, chunk: int | None = None, bit: int = 0x01) -> None:
        """Flip a bit of one part at fraction ``at`` of its length (0: the first byte, 1: the last)."""
        data = bytearray(self.read(seq, part, chunk))
        data[min(int(len(data) * at), len(data) - 1)] ^= bit
        self.write(seq, part, bytes(data), chunk)

    def flip_at(self, seq: int, part: str, offset: int, chunk: int | None = None, bit: int = 0x01) -> None:
        """Flip a bit of the byte at ``offset`` (negative: from the end) of one part."""
        data = bytearray(self.read(seq, part, chunk))
        data[offset] ^= bit
        self.write(seq, part, bytes(data), chunk)

    def swap(self, seq: int, other: int, part: str, chunk: int | None = None, other_chunk: int | None = None) -> None:
        """Trade one part between two rows (or two chunks of one row)."""
        first, second = self.read(seq, part, chunk), self.read(other, part, other_chunk)
        self.write(seq, part, second, chunk)
        self.write(other, part, first, other_chunk)


class RowReads:
    """What both attackers read of the row and summary tables the same way, through their own ``_all`` (qmark
    placeholders on both)."""

    def _all(self, sql: str, *params: object) -> list[tuple]:
        raise NotImplementedError

    def row(self, seq: int) -> dict:
        """The clear columns of row ``seq``."""
        (found,) = self._all(f"SELECT {', '.join(COLUMNS)} FROM rows WHERE seq = ?", seq)
        return dict(zip(COLUMNS, found, strict=True))

    def rows(self) -> dict[int, dict]:
        """Every row's clear columns, by seq."""
        found = self._all(f"SELECT seq, {', '.join(COLUMNS)} FROM rows ORDER BY seq")
        return {seq: dict(zip(COLUMNS, columns, strict=True)) for seq, *columns in found}

    def summaries(self) -> dict[int, bytes]:
        """Every stored summary, by seq: in its row, or in the summaries table (rows written before the summary
        moved into the row)."""
        summary = self._held("summary", "NULL")
        return dict(self._all(f"SELECT seq, {summary} FROM rows WHERE {summary} IS NOT NULL UNION ALL "
                              "SELECT seq, sealed FROM summaries ORDER BY 1"))

    def _held(self, column: str, otherwise: str) -> str:
        """``column`` of rows, or ``otherwise`` (an expression) where the rows do not have it (an older file)."""
        return column


@dataclass(frozen=True)
class SavedRow:
    """An attacker's copy of one row: its seq, clear columns, sealed summary and sealed chunks (by index)."""

    seq: int
    columns: dict
    summary: bytes
    chunks: tuple[tuple[int, bytes], ...]


class RowCopies:
    """Copies of whole rows, made the same way on both stores through their own ``save_row`` and ``insert_row``."""

    def save_row(self, seq: int) -> SavedRow:
        raise NotImplementedError

    def insert_row(self, seq: int, columns: dict, summary: bytes, chunks: Iterable[tuple[int, bytes]]) -> None:
        raise NotImplementedError

    def copy_row(self, seq: int, to: int, **columns: object) -> None:
        """Copy row ``seq`` with its summary and chunks to ``to``, optionally changing clear columns."""
        self.write_row(replace(self.save_row(seq), seq=to), **columns)

    def write_row(self, saved: SavedRow, **columns: object) -> None:
        """Insert a saved row (optionally with some clear columns changed) at its seq."""
        self.insert_row(saved.seq, {**saved.columns, **columns}, saved.summary, saved.chunks)
