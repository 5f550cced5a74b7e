"""The deletion ledgers on the vault's side (threat_model.md, "Rollback"; the records themselves are keys/ledger.py).

A delete enters the row in its owner's ledger, in the delete's own transaction, and then raises the owner's count
of deletes in the keyring. Before a delete or an ``extend_turn`` writes, the owner's ledger must count at least as
many deletes as the keyring does: fewer means the file was put back to an older copy. Reads leave out the rows a
ledger names (written back after their delete), and gc removes them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from keys import DeletionLedgers, IndexKey, KeyManager, Ledger, SealedLedger, tags_equal
from vault.counters import Counters
from vault.errors import IntegrityError, KeyUnavailable, NotFound
from vault.storage import Snapshot, Store, StoredRow, WriteTx

log = logging.getLogger("scratchvault")
VERIFIED_CACHE_SIZE = 4096  # owners whose verified ledger a process keeps (cheap to verify again)
NO_LEDGER = Ledger()


class Deletions:
    """Each owner's ledger of deleted rows: written by delete, checked by delete and extend_turn against the
    keyring's count, consulted by reads, and used by gc to remove rows written back after their delete."""

    def __init__(self, store: Store, keys: KeyManager, ledgers: DeletionLedgers, counters: Counters,
                 now: Callable[[], float], max_ttl_seconds: float) -> None:
        self._store, self._keys, self._ledgers, self._counters, self._now = store, keys, ledgers, counters, now
        self._max_ttl = max_ttl_seconds  # no genuine copy of a row deleted now expires later than now + this
        self._verified: dict[bytes, tuple[tuple[int, bytes], Ledger]] = {}  # owner tag -> (counter, tag), ledger

    def named(self, reads: Snapshot, index: IndexKey, owner_tag: bytes) -> Ledger:
        """The owner's ledger for a read: its counter and tag are read each time, its body and tag checked only
        when they differ from those this process verified last (a tag is never accepted for another body)."""
        head = reads.ledger_head(owner_tag)
        if head is None:
            return NO_LEDGER
        cached = self._verified.get(owner_tag)
        if cached is not None and cached[0] == head:
            return cached[1]
        sealed = reads.ledger(owner_tag)
        return NO_LEDGER if sealed is None else self._remember(owner_tag, self._ledgers.open(index, owner_tag, sealed),
                                                               sealed.tag)

    def floor(self, owner_tag: bytes) -> int:
        """The keyring's count of the owner's deletes, read before the write lock (a keyring wait never holds
        it): a delete committed in between only makes the file's count higher, never lower."""
        return self._ledgers.counter(owner_tag)

    def checked(self, tx: WriteTx, index: IndexKey, owner_tag: bytes, floor: int) -> Ledger:
        """The owner's ledger under the write lock, authentic and counting at least ``floor`` deletes, else
        IntegrityError (altered, or put back to an older copy)."""
        sealed = tx.ledger(owner_tag)
        ledger = self._ledgers.check(index, owner_tag, sealed, floor)
        return ledger if sealed is None else self._remember(owner_tag, ledger, sealed.tag)

    def delete(self, row: StoredRow) -> None:
        """Delete a row whose owner's check already passed (NotFound if it went meanwhile)."""
        if not self._remove([row]):
            raise NotFound()  # deleted by someone else between the check and the delete

    def collect_early(self, after: float, until: float) -> int:
        """gc(now) with ``now`` ahead of the clock: rows still live at ``after`` but expiring by ``until`` are
        removed like deletes, each entered in its owner's ledger; returns how many."""
        with self._store.snapshot() as reads:
            rows = reads.expiring(after, until)
        return self._remove(rows) if rows else 0

    def _remove(self, rows: list[StoredRow]) -> int:
        """Delete ``rows`` and enter each in its owner's ledger, in one transaction; then scrub, and raise each
        owner's count in the keyring (a keyring failure there leaves the deletes done). Returns how many went."""
        index = self._keys.index_key()
        floors = {owner_tag: self.floor(owner_tag) for owner_tag in {row.owner_tag for row in rows}}  # before the lock
        written: dict[bytes, tuple[Ledger, bytes]] = {}
        # kept until every genuine copy has expired: the expiry stored now may have been lowered by a writer of the
        # file, or an older copy may live longer (an extend_turn undone before the delete); every expiry ever
        # authenticated for the row was set by now, at most max_ttl_seconds ahead (threat_model.md, "Rollback")
        keep_until = self._now() + self._max_ttl

        def work(tx: WriteTx) -> int:  # run again on a full disk, after the store made room (store.deleting)
            written.clear()
            removed = 0
            for owner_tag, floor in floors.items():
                ledger = self.checked(tx, index, owner_tag, floor)
                gone = [(row.row_id, max(row.expires_at, stored, keep_until)) for row in rows
                        if row.owner_tag == owner_tag and (stored := tx.delete_row(row)) is not None]
                if gone:
                    ledger = ledger.with_deleted(gone, self._now())
                    sealed = self._ledgers.seal(index, owner_tag, ledger)
                    tx.put_ledger(owner_tag, sealed)
                    written[owner_tag] = ledger, sealed.tag
                    removed += len(gone)
            return removed

        removed = self._store.deleting(work)  # the store checkpoints after a commit that deleted rows
        for owner_tag, (ledger, tag) in written.items():
            self._remember(owner_tag, ledger, tag)
            self.record(owner_tag, ledger.counter, floors[owner_tag])
        return removed

    def record(self, owner_tag: bytes, counter: int, floor: int) -> None:
        """After a commit: raise the keyring's count to the ledger's when it is below. If the keyring fails, what
        committed stays; the count is written by the owner's next delete or extend_turn, and until then a
        rollback to a copy between the two counts goes unnoticed (counted and logged, never raised)."""
        if counter <= floor:
            return
        try:
            self._ledgers.record(owner_tag, counter)
        except KeyUnavailable:
            self._counters.count("deletes_not_counted_in_keyring")
            log.warning("scratchvault: a delete was done, but the OS keyring did not take the owner's new count "
                        "of deletes; it is written again by their next delete or extend_turn")

    def collect(self) -> int:
        """gc's repair: remove every row a ledger names (its owner deleted it; it was written back into the file
        since); returns how many. A ledger that fails authentication is reported after the others are done."""
        with self._store.snapshot() as reads:
            ledgers = reads.ledgers()
            if not ledgers:
                return 0  # no owner has deleted a row: no key needed (gc works while the keyring is away)
            found, altered = self._written_back(reads, self._keys.index_key(), ledgers)
        removed = 0
        if found:
            removed = self._store.deleting(
                lambda tx: sum(tx.delete_row(row) is not None for row in found))
            log.warning("scratchvault: gc removed %d row(s) their owners had deleted, written back into the file "
                        "since (a rollback of the file)", removed)
        if altered:
            raise IntegrityError(f"the record of deleted rows of {altered} owner(s) fails authentication (the file "
                                 "was altered); gc did the rest of its work. Restore the database from backup")
        return removed

    def _written_back(self, reads: Snapshot, index: IndexKey,
                      ledgers: list[tuple[bytes, SealedLedger]]) -> tuple[list[StoredRow], int]:
        """The rows in the file that their owner's ledger names, and how many ledgers fail authentication."""
        found, altered = [], 0
        for owner_tag, sealed in ledgers:
            try:
                ledger = self._ledgers.open(index, owner_tag, sealed)
            except IntegrityError:
                altered += 1
                continue
            rows = reads.find_rows(owner_tag, [(row_id, index.row_seq(row_id)) for row_id in ledger.entries])
            found += [row for row in rows if tags_equal(row.owner_tag, owner_tag)]
        return found, altered

    def _remember(self, owner_tag: bytes, ledger: Ledger, tag: bytes) -> Ledger:
        """Keep the owner's verified ledger for reads (bounded; verifying again is cheap)."""
        if len(self._verified) >= VERIFIED_CACHE_SIZE:
            self._verified.clear()
        self._verified[owner_tag] = ((ledger.counter, tag), ledger)
        return ledger
