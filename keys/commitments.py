"""Where the database keeps commitments to keys, version reservations and tombstones: the protocols a store
implements for the key manager (vault/storage/base.py); ``KeyRecords`` is both, what ``Store.commitments`` is."""

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

    def tombstone_owner_versions(self, owner_tag: bytes, versions: set[int] | None) -> set[int]:
        """Destroy versions in the database (a tombstone each, the commitment dropped); None: every version the
        owner ever had or reserved, and the owner's registration. Returns the versions destroyed; each is read
        back before the transaction ends (its tombstone there, its commitment gone), else IntegrityError."""

    def locked(self) -> AbstractContextManager[object]:
        """A write transaction of the store (its write lock held until the block ends)."""

    def reserve_owner_version(self, owner_tag: bytes, now: float, abandon_before: float) -> int:
        """Reserve the next version in a committed transaction of its own (never inside another); older
        reservations that never got a commitment, made before ``abandon_before``, are tombstoned."""

    def version_tops(self) -> list[tuple[bytes, int]]:
        """(owner tag, the highest version reserved, committed or tombstoned) of every owner the database lists."""

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


class EpochRecords(Protocol):
    """Where the database keeps the expiry epochs' keys (keys/epochs/keys.py): commitments, attempts reserved
    before an entry is written, and tombstones of destroyed epochs and abandoned attempts. An epoch is
    (length, number); attempts count from 1; a tombstone of attempt 0 closes its epoch for good."""

    def locked(self) -> AbstractContextManager[object]:
        """A write transaction holding the store's key lock until the block ends."""

    def epoch_commitment(self, length: int, epoch: int) -> tuple[int, bytes] | None:
        """(attempt, commitment) of the epoch's recorded key, or None (never made, or destroyed)."""

    def reserve_epoch(self, length: int, epoch: int, now: float, abandon_before: float) -> int | None:
        """Reserve the epoch's next attempt in a committed transaction of its own; None when the epoch is closed.
        Reservations made before ``abandon_before`` that never got a commitment are tombstoned on the way."""

    def epoch_pending(self, length: int, epoch: int, attempt: int) -> bool:
        """Whether an attempt is reserved, not committed, not tombstoned, and its epoch not closed."""

    def record_epoch_commitment(self, length: int, epoch: int, attempt: int, value: bytes) -> None:
        """Record the epoch's key (the first recorded stays)."""

    def tombstone_epoch_attempt(self, length: int, epoch: int, attempt: int) -> None:
        """Destroy one attempt (a write that failed, or lost a first-use race)."""

    def close_epochs(self, ended_by: float) -> list[tuple[int, int]]:
        """Close every epoch that ended by ``ended_by`` and has a key or reservation: tombstone its attempts and
        drop its commitment, committed before any entry is deleted; returns the (length, epoch) that had a key."""

    def epoch_tombstones(self, unswept_only: bool) -> list[tuple[int, int, int, bool]]:
        """(length, epoch, attempt, swept) of destroyed attempts (closing markers, attempt 0, left out). Closing an
        epoch, or tombstoning an attempt, makes its tombstone unswept even where one was already marked swept."""

    def mark_epochs_swept(self, attempts: list[tuple[int, int, int]]) -> None:
        """Record that these destroyed attempts' keyring entries are gone."""

    def live_epochs(self) -> list[tuple[int, int]]:
        """(length, epoch) of every epoch with a recorded key, oldest first. Every listing and closing leaves out
        rows no vault writes (a length out of bounds, a negative number, an end past 63 bits): see bad_epoch_rows."""

    def recorded_attempt(self, length: int, epoch: int) -> int | None:
        """The attempt of the epoch's key row, whether or not a tombstone names it."""

    def oldest_epoch(self, length: int) -> int | None:
        """The lowest epoch of ``length`` listed in any of the epoch tables."""

    def close_found(self, attempts: list[tuple[int, int, int]]) -> None:
        """Tombstone (unswept) attempts whose entries were found in the keyring unlisted, and close their epochs."""

    def bad_epoch_rows(self) -> int:
        """How many rows of the epoch tables no vault writes (left out of every listing and closing)."""


class KeyRecords(KeyCommitments, EpochRecords, Protocol):
    """A store's key records (``Store.commitments``): its owner key versions and its expiry epochs' keys, over one
    database and one key lock, so the key manager hands the same object to its owner and epoch keys."""
