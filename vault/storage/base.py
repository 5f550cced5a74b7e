"""The store contract: what the vault asks of a database, with no driver type in any signature.

One transaction convention:

- reads run inside ``store.snapshot()``, which yields a :class:`Snapshot`: one consistent view for one call (no
  row deleted and its seq reused between two of the call's reads);
- writes run only inside ``store.transaction()``, which yields a :class:`WriteTx` (it reads too). It commits
  when the block ends and rolls back when it raises. Write transactions of one vault are serialised: two never
  hand out one seq, and what a put reads in ``next_seq_and_commitments`` still holds when it inserts;
- the batched deletes, ``check_space``, ``stats``, ``scrub`` and ``close`` run on their own; deletes must work on
  a full disk (the SQLite store releases a ballast file for them); ``describe`` (for doctor) reads a
  database without opening it as a vault.

Key records (``store.commitments``, the ``keys.KeyRecords`` protocol: commitments and epochs) join the write
transaction the calling thread has open, if any, else run in one of their own. So a keyset written to the keyring under
``transaction()`` and the commitment recorded for it commit or roll back together, and the first key of an owner
is made once however many processes race for it.

Rows are addressed by ``seq``, a positive integer the store hands out and may reuse after a delete; ids encrypt
it (keys/blind_index.py), so a row found at a seq is the id's only if it stores that very id. Clear columns are
only what must be indexed or swept without keys; everything else is sealed before it reaches the store.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, TypeVar

from keys import KeyRecords, SealedLedger


class ListedRow(NamedTuple):
    """What a listing needs of a row, no more: its clear columns and its sealed summary."""

    seq: int
    row_id: bytes
    key_version: int
    expires_at: float
    size_bytes: int
    sealed_summary: bytes


RowSeqs = Callable[[list[bytes]], list[int]]  # the seq each row id names (IndexKey.row_seqs)


class RowAt(Protocol):
    """Where a row is: its owner's tag and its seq (a StoredRow, or a RowKey while it is being put). Every call on
    one row names both: a store sharded by owner finds the row on the one node holding its owner."""

    @property
    def owner_tag(self) -> bytes: ...

    @property
    def seq(self) -> int: ...


class RowKey(NamedTuple):
    """A row's place before it is stored (its chunks go in first)."""

    owner_tag: bytes
    seq: int
Progress = Callable[[int], None] | None
T = TypeVar("T")


@dataclass(slots=True)
class StoredRow:
    """A row as stored: its clear columns and its sealed envelope (wrapped data key, metadata); nothing decrypted."""

    seq: int
    row_id: bytes
    owner_tag: bytes
    turn_tag: bytes
    key_version: int
    expires_at: float
    size_bytes: int
    wrapped_key: bytes
    metadata: bytes


class Snapshot(Protocol):
    """Reads that see one consistent state. A stored value of the wrong type or range is an IntegrityError."""

    def find_row(self, owner_tag: bytes, row_id: bytes, seq: int) -> StoredRow | None:
        """The row ``row_id`` names (``seq`` is the seq it encrypts) if the owner of ``owner_tag`` holds it; None
        unless the row there stores this very id (compared in constant time, before anything else of the row is
        trusted). The owner is part of the lookup, so a sharded store routes it to the one node holding the owner."""

    def held_by_another(self, owner_tag: bytes, row_id: bytes, seq: int) -> bool:
        """Whether the row ``row_id`` names exists but another owner than ``owner_tag`` holds it: asked only once a
        lookup found nothing for this owner, for the audit trail (a probe of another's row is marked denied); by
        seq alone, so with Citus it is asked of every shard."""

    def find_rows(self, owner_tag: bytes, wanted: list[tuple[bytes, int]]) -> list[StoredRow]:
        """``find_row`` of each (row id, seq) of one owner in ``wanted``, in one statement (a few for a long list):
        the rows found, in the order asked, with exactly find_row's checks (a row not storing the very id asked is
        left out)."""

    def list_turn(self, owner_tag: bytes, turn_tag: bytes, now: float) -> list[tuple[StoredRow, bytes | None]]:
        """Unexpired rows of one owner's turn, each with its sealed summary (None if missing)."""

    def list_turn_summaries(self, owner_tag: bytes, turn_tag: bytes, now: float,
                            row_seqs: RowSeqs) -> list[ListedRow]:
        """A listing's columns of each unexpired row of one owner's turn, oldest first. Every row's id is checked
        against the seq it names (``row_seqs``): a row not where its id says is an IntegrityError, and so is a
        missing summary."""

    def wrapped_key(self, owner_tag: bytes, seq: int) -> bytes:
        """The wrapped data key of the owner's row ``seq`` (a listing needs it only for a format 1 summary)."""

    def read_summary(self, row: RowAt) -> bytes | None:
        """The sealed summary of a row found (its owner and seq)."""

    def read_chunks(self, row: RowAt, first: int, last: int) -> Generator[tuple[int, bytes], None, None]:
        """Sealed chunks ``first..last`` (inclusive) of a row found as (index, sealed), in order, fetched as the
        iterator steps, so a full read never holds every sealed chunk. Iterate it to its end, or close it."""

    def turn_has_rows(self, owner_tag: bytes, turn_tag: bytes, now: float) -> bool:
        """Whether one owner's turn has an unexpired row (nothing decrypted)."""

    def owner_has_rows(self, owner_tag: bytes) -> bool:
        """Whether any row, expired or not, belongs to this owner."""

    def ledger(self, owner_tag: bytes) -> SealedLedger | None:
        """The owner's deletion ledger as stored (keys/ledger.py), or None."""

    def ledger_head(self, owner_tag: bytes) -> tuple[int, bytes] | None:
        """The counter and tag of the owner's deletion ledger, without its body (what a read compares with the
        ledger it verified last), or None."""

    def ledgers(self) -> list[tuple[bytes, SealedLedger]]:
        """Every owner's deletion ledger, by owner tag."""

    def expiring(self, after: float, until: float) -> list[StoredRow]:
        """Every row live at ``after`` that expires by ``until`` (what a gc ahead of the clock collects early)."""


class WriteTx(Snapshot, Protocol):
    """A write transaction: the only place rows are inserted or changed."""

    def next_seq_and_commitments(self, owner_tag: bytes, key_version: int,
                                 epoch: tuple[int, int] = (0, 0)) -> tuple[int, bytes | None, bytes | None]:
        """The seq the next row gets and the recorded commitments of the owner key version and the expiry epoch's
        key that will wrap it (None if none), read together so the put can refuse a version retired or shredded,
        or an epoch closed, meanwhile."""

    def insert_chunk(self, row: RowAt, index: int, sealed: bytes) -> None:
        """Store sealed chunk ``index`` of the row being put; QuotaExceeded when the store's free-space reserve would be
        passed (checked as a row's chunks go in, so a long stream stops early; the transaction then rolls back)."""

    def insert_row(self, row: StoredRow, sealed_summary: bytes) -> None:
        """Store a row's clear columns, envelope and summary (after its chunks); QuotaExceeded as above."""

    def owner_usage(self, owner_tag: bytes) -> tuple[int, int]:
        """(rows, bytes) stored for an owner, expired rows not yet collected included: what its quotas count."""

    def update_expiry(self, row: RowAt, expires_at: float, wrapped_key: bytes, metadata: bytes,
                      sealed_summary: bytes) -> None:
        """Give a row found a new expiry with its data key wrapped for the new expiry's epoch and its metadata and
        summary sealed again for it."""

    def update_wrapped_key(self, row: RowAt, version: int, wrapped_key: bytes, sealed_summary: bytes | None) -> None:
        """Store a row's data key wrapped under ``version``, and its summary sealed again (None: unchanged)."""

    def rows_to_rewrap(self, owner_tag: bytes, primary: int, limit: int) -> list[tuple[StoredRow, bytes | None]]:
        """Up to ``limit`` rows of an owner wrapped under another version than ``primary`` or under no expiry epoch
        (format 1's 60-byte wrapped key), with their summaries."""

    def put_meta(self, name: str, value: bytes) -> None:
        """Set a vault-wide value once (the vault id)."""

    def delete_row(self, row: StoredRow) -> float | None:
        """Delete one row found, its summary and chunks; returns the expiry it had (its ledger entry's), or None if
        the row at its seq no longer stores its id (deleted meanwhile; its seq may belong to a newer row). The caller
        scrubs after the commit."""

    def put_ledger(self, owner_tag: bytes, ledger: SealedLedger) -> None:
        """Store (or replace) the owner's deletion ledger."""


class Store(Protocol):
    """A vault's database. ``max_chunks`` is how many chunks one row may have here."""

    max_chunks: int

    @property
    def commitments(self) -> KeyRecords:
        """The store's key records (read-only: a store keeps its own, of its own type)."""

    def snapshot(self) -> AbstractContextManager[Snapshot]:
        """A read snapshot (inside this thread's open write transaction, that transaction)."""

    def transaction(self) -> AbstractContextManager[WriteTx]:
        """A write transaction, serialised with every other writer of this database."""

    def get_meta(self, name: str) -> bytes | None:
        """A vault-wide value (the vault id), or None."""

    def is_empty(self) -> bool:
        """No rows, key commitments or deletion ledgers: nothing a new vault id and index key could orphan."""

    def check_space(self, size_hint: int) -> None:
        """QuotaExceeded when a put of about ``size_hint`` bytes (0: not known, a stream) would leave less free
        space than the store keeps in reserve; called before the put waits for the write lock. Nothing is
        written."""

    def deleting(self, work: Callable[[WriteTx], T]) -> T:
        """``work``, a write that only removes (a delete, a shred forgetting keys), in a write transaction that must
        succeed on a full disk too: the store makes room for it (the SQLite store releases its ballast and runs it
        again)."""

    def delete_expired(self, now: float, progress: Progress = None) -> int:
        """Delete every row expired at ``now`` in batches, then scrub; ``progress`` gets the running total."""

    def delete_owner_rows(self, owner_tag: bytes, progress: Progress = None) -> int:
        """Delete every row of an owner in batches, then scrub; ``progress`` gets the running total."""

    def stats(self, now: float) -> dict[str, Any]:
        """Counts of rows and bytes (in all and by key version) and of expired rows not yet collected, and
        ``disk``: its free space and reserve (``free_bytes``, ``reserve_bytes``, ``ballast_bytes``,
        ``file_system_bytes``)."""

    def scrub(self) -> None:
        """Remove what deletes and rewraps left readable beyond the live tables (a log, old page images); a
        scrub that cannot run now stays pending and never fails the call that asked for it."""

    def close(self) -> None:
        """Release the database; later calls raise StorageError."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One line of ``doctor``'s report about a database: ``status`` is "ok", "FAIL" (unsafe), "WARN" (safe, but
    needs attention: less free space than the reserve) or "" (a fact)."""

    status: str
    text: str
