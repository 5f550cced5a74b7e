"""Deletion ledgers and their counters (threat_model.md, "Rollback").

Each owner who has deleted a row has a ledger in the database: the ids of their deleted rows, each with the
expiry it had, authenticated (HMAC-SHA256 under a subkey of the index key, ``IndexKey.ledger_tag``) together with
a counter that every delete raises by one. The same counter is kept outside the file, in the OS keyring (service
``scratchvault/<vault id hex>/deletions``, user ``<owner tag hex>``, the counter in decimal). A row written back
after its delete is named by the ledger; a ledger (or a whole file) put back from before a delete counts fewer
deletions than the keyring does.

Body: entries of 24 bytes, ``row id (16) | expiry (IEEE double, big-endian)``, sorted by row id. Tag:
``HMAC(ledger key, encode_fields("scratchvault/deletions/v1", vault_id, owner_tag, counter (8 bytes, big-endian),
body))``. Nothing here is secret (row ids and expiries are in the file anyway), only authentic.
"""

from __future__ import annotations

import hmac
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from keys.blind_index import IndexKey
from keys.errors import IntegrityError, KeyUnavailable
from keys.keyring.edge import REMEDY, KeyringEdge
from keys.keyring.secret import Secret

ENTRY = struct.Struct(">16sd")  # row id, the expiry the row had when it was deleted
MAX_COUNTER = 2**63 - 1  # an SQLite INTEGER; 8 bytes in the tag
ALTERED = ("this owner's record of deleted rows in the database fails authentication (the file was altered); "
           "nothing was changed. Restore the database from backup")
ROLLED_BACK = ("this owner's record of deleted rows in the database counts fewer deletes than the OS keyring does: the "
               "file (or its deletions table) was put back to an older copy, so rows the owner deleted may be back. "
               "Nothing was changed. Restore the newest copy of the database; if this older copy was restored on "
               "purpose, remove this vault's deletion counters from the keyring (service {service}) to accept it "
               "as it is")


@dataclass(frozen=True, slots=True)
class SealedLedger:
    """A ledger as stored: its counter, body and tag."""

    counter: int
    body: bytes
    tag: bytes


@dataclass(frozen=True, slots=True)
class Ledger:
    """One owner's deleted rows (row id -> the expiry it had) and how many deletes they have made."""

    counter: int = 0
    entries: Mapping[bytes, float] = field(default_factory=dict)

    def names(self, row_id: bytes) -> bool:
        """Whether the owner deleted the row with this id (any copy of it is one written back)."""
        return row_id in self.entries

    def with_deleted(self, rows: Iterable[tuple[bytes, float]], now: float) -> Ledger:
        """This ledger with ``rows`` (id, expiry) added, counted as one more delete, and every entry whose expiry
        has passed at ``now`` dropped (a copy of such a row is expired, which its authenticated expiry enforces)."""
        kept = {row_id: expiry for row_id, expiry in self.entries.items() if expiry > now}
        kept.update(rows)
        return Ledger(self.counter + 1, kept)

    def body(self) -> bytes:
        """The stored form of the entries."""
        return b"".join(ENTRY.pack(row_id, expiry) for row_id, expiry in sorted(self.entries.items()))


class DeletionLedgers:
    """Seals and opens one vault's ledgers, and reads and writes the owners' counters in the keyring."""

    __slots__ = ("_keyring", "_service", "_vault_id")

    def __init__(self, keyring: KeyringEdge, vault_id: bytes) -> None:
        self._keyring = keyring
        self._vault_id = vault_id
        self._service = "scratchvault/" + vault_id.hex() + "/deletions"

    def seal(self, index: IndexKey, owner_tag: bytes, ledger: Ledger) -> SealedLedger:
        """The stored form of ``ledger``."""
        if not 0 <= ledger.counter <= MAX_COUNTER:
            raise IntegrityError("an owner's count of deletes is out of range")
        body = ledger.body()
        return SealedLedger(ledger.counter, body, index.ledger_tag(self._vault_id, owner_tag, ledger.counter, body))

    def open(self, index: IndexKey, owner_tag: bytes, sealed: SealedLedger) -> Ledger:
        """The ledger ``sealed`` holds, if its tag is this vault's and this owner's; else IntegrityError."""
        counter, body = sealed.counter, sealed.body
        if not (0 <= counter <= MAX_COUNTER and len(body) % ENTRY.size == 0
                and hmac.compare_digest(index.ledger_tag(self._vault_id, owner_tag, counter, body), sealed.tag)):
            raise IntegrityError(ALTERED)
        return Ledger(counter, dict(ENTRY.iter_unpack(body)))

    def check(self, index: IndexKey, owner_tag: bytes, sealed: SealedLedger | None, floor: int) -> Ledger:
        """The owner's ledger, which must count at least ``floor`` deletes (the keyring's counter, read before the
        transaction); fewer is a rollback (IntegrityError). No ledger counts none."""
        ledger = Ledger() if sealed is None else self.open(index, owner_tag, sealed)
        if ledger.counter < floor:
            raise IntegrityError(ROLLED_BACK.format(service=self._service))
        return ledger

    def counter(self, owner_tag: bytes) -> int:
        """The owner's count of deletes in the keyring (0 when there is none: no delete since this was built)."""
        stored = self._keyring.get(self._service, owner_tag.hex())
        if stored is None:
            return 0
        count = _count(stored)
        if count is None:
            raise KeyUnavailable("the keyring's count of deletes for an owner is not a count; restore it from the "
                                 f"keyring backup, or delete it (service {self._service}); {REMEDY}")
        return count

    def record(self, owner_tag: bytes, counter: int) -> None:
        """Store the owner's count of deletes in the keyring (after the delete that made it committed). Every
        value written is that of a committed ledger, and ledgers only count up: a write that lands late, or
        after another process's, can only leave the keyring below the file, never above it (and a keyring with
        check-and-set, OpenBao's, keeps the higher count: one found higher on read-back was recorded)."""
        self._keyring.set(self._service, owner_tag.hex(), Secret(str(counter)),
                          kept=lambda stored: stored is not None and (_count(stored) or 0) >= counter)


def _count(stored: Secret) -> int | None:
    """A count of deletes as the keyring holds it, or None for anything else."""
    return deletion_count_value(stored.reveal())


def deletion_count_value(text: str) -> int | None:
    """A count of deletes as the keyring holds it (plain decimal, no leading zero), or None for anything else."""
    if not (text.isascii() and text.isdigit() and len(text) <= 19 and (text == "0" or text[0] != "0")
            and int(text) <= MAX_COUNTER):
        return None
    return int(text)
