"""Where the database keeps commitments to keys, version reservations and tombstones: the protocol a store
implements for the key manager (vault/storage/base.py)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol


class KeyCommitments(Protocol):
    """Where the database keeps commitments to keys. The store implements it; every write joins the write
    transaction the calling thread has open, else runs in one of its own (vault/storage/base.py)."""

    def owner_commitments(self, owner_tag: bytes) -> dict[int, bytes]:
        """Recorded commitments of one owner's key versions."""

    def record_owner_commitment(self, owner_tag: bytes, version: int, value: bytes, sealed_name: bytes) -> None:
        """Record a commitment and register the owner (inside the caller's transaction if one is open)."""

    def tombstone_owner_versions(self, owner_tag: bytes, versions: set[int] | None) -> None:
        """Destroy versions in the database (a tombstone each, the commitment dropped); None: every version the
        owner ever had or reserved, and the owner's registration."""

    def locked(self) -> AbstractContextManager[object]:
        """A write transaction of the store (its write lock held until the block ends)."""

    def reserve_owner_version(self, owner_tag: bytes, now: float, abandon_before: float) -> int:
        """Reserve the next version in a committed transaction of its own (never inside another); older
        reservations that never got a commitment, made before ``abandon_before``, are tombstoned."""

    def version_pending(self, owner_tag: bytes, version: int) -> bool:
        """Whether a version is reserved, not committed and not tombstoned."""

    def tombstones(self, owner_tag: bytes | None, unswept_only: bool) -> list[tuple[bytes, int, bool]]:
        """(owner tag, version, swept) of destroyed versions."""

    def mark_swept(self, owner_tag: bytes, versions: list[int]) -> None:
        """Record that these destroyed versions' keyring entries are gone."""

    def registered_owners(self) -> list[tuple[bytes, bytes]]:
        """(owner tag, sealed name) of every owner that ever had a keyset here."""

    def key_versions_in_use(self, owner_tag: bytes) -> dict[int, int]:
        """How many rows each key version of an owner still wraps."""

    def index_commitment(self) -> bytes | None:
        """The recorded commitment of the index key."""

    def record_index_commitment(self, value: bytes) -> None:
        """Record the index key's commitment."""
