"""Edits of one part of a row that every store's attacker makes the same way, through its own ``read`` and
``write`` (tests/attacks/sqlite_attacker.py, tests/attacks/postgres_attacker.py)."""

from __future__ import annotations


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
