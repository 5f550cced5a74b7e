"""Per-owner quotas: how many rows and bytes one owner may keep stored, so that one user cannot take the space every
other user of the service needs (threat_model.md, "Full disk"). Off unless set; checked inside the put's write
transaction, so two puts of one owner, in any processes, never both pass on the same count."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from vault.errors import QuotaExceeded
from vault.inputs import check_int
from vault.row.chunks import Chunk
from vault.storage import WriteTx

MAX_SETTING = 2**62
_COLLECTED = "rows that expired count until gc removes them"


@dataclass(frozen=True, slots=True)
class OwnerQuotas:
    """At most ``max_rows`` rows and ``max_bytes`` bytes of content stored per owner (None: no limit)."""

    max_rows: int | None = None
    max_bytes: int | None = None

    @classmethod
    def checked(cls, max_rows: object, max_bytes: object) -> OwnerQuotas:
        """The quotas of ``Vault.open``'s settings, each None or a positive int."""
        return cls(None if max_rows is None else check_int(max_rows, "owner_max_rows", 1, MAX_SETTING),
                   None if max_bytes is None else check_int(max_bytes, "owner_max_bytes", 1, MAX_SETTING))

    def admit(self, tx: WriteTx, owner_tag: bytes, chunks: Iterator[Chunk]) -> Iterator[Chunk]:
        """Under the put's write lock: QuotaExceeded if one more row would pass ``max_rows``; else the row's chunks,
        refused as they are cut once their bytes would pass ``max_bytes`` (a stream is not read to its end)."""
        if self.max_rows is None and self.max_bytes is None:
            return chunks  # no quota: not even the count is read
        rows, stored = tx.owner_usage(owner_tag)
        if self.max_rows is not None and rows >= self.max_rows:
            raise QuotaExceeded(f"refused: the owner's quota of {self.max_rows:,} stored rows is reached "
                                f"({_COLLECTED}); nothing was stored. Delete rows of theirs, or run gc")
        return chunks if self.max_bytes is None else self._metered(chunks, self.max_bytes, stored)

    @staticmethod
    def _metered(chunks: Iterator[Chunk], max_bytes: int, stored: int) -> Iterator[Chunk]:
        """The chunks, until they would bring the owner past ``max_bytes``."""
        total = stored
        for chunk in chunks:
            total += len(chunk.data)
            if total > max_bytes:
                raise QuotaExceeded(f"refused: this would pass the owner's quota of {max_bytes:,} stored bytes "
                                    f"({stored:,} stored; {_COLLECTED}); nothing was stored. Delete rows of "
                                    "theirs, or run gc")
            yield chunk

    def report(self) -> dict[str, Any]:
        """The settings, for ``stats()``."""
        return {"owner_max_rows": self.max_rows, "owner_max_bytes": self.max_bytes}
