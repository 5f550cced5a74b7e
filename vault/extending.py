"""extend_turn's and extend's work (a resumed dialog, ``Scratchpad.resume``; a read that refreshes its row): under
the write lock, the owner's ledger of deleted rows is checked against the keyring's count (vault/deletions.py), rows
it names are removed again (their owner had deleted them; a writer of the file put them back), and every other
chosen live row (the turn's, or the one row) that would expire before the new expiry is re-sealed with it, its data
key wrapped again under the epoch of its new expiry (threat_model.md, "Rollback" and "Expiry epochs")."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from keys import EPOCH_CLOSED, IndexKey, KeyManager, OpenedRow, RowRecipe, SealingEpoch, tags_equal
from vault.deletions import Deletions
from vault.errors import IntegrityError, KeyUnavailable, NotFound
from vault.inputs import expiry
from vault.row.format import Metadata, SummaryRecord
from vault.storage import Store, StoredRow, WriteTx

Unseal = Callable[[str, StoredRow], tuple[OpenedRow, Metadata]]
EPOCH_ATTEMPTS = 3  # the new expiry's epoch is fetched before the write lock; it moves only if the wait crossed one


class _EpochMoved(Exception):
    """The new expiry fell in another epoch than the key fetched before the write lock: fetch again."""


@dataclasses.dataclass(frozen=True)
class ChosenRows:
    """The rows to extend: an owner's live rows of one turn, or (``row_id`` given) that one row of the owner's."""

    user_id: str
    turn_id: str | None = None
    row_id: bytes | None = None

    def rows(self, tx: WriteTx, index: IndexKey, owner_tag: bytes, moment: float) -> list[tuple[StoredRow,
                                                                                                 bytes | None]]:
        """The chosen rows with their sealed summaries; one row that is missing, another owner's or expired is
        NotFound, as for a read."""
        if self.row_id is None:
            return tx.list_turn(owner_tag, index.turn_tag(owner_tag, str(self.turn_id)), moment)
        row = tx.find_row(owner_tag, self.row_id, index.row_seq(self.row_id))
        if row is None or not tags_equal(row.owner_tag, owner_tag) or row.expires_at <= moment:
            raise NotFound()
        return [(row, tx.read_summary(row))]


class Extender:
    """Extends a vault's rows: made once per vault over its store, keys, row recipe, deletions, ``unseal`` (opens
    a row whose owner was checked) and the vault's clock."""

    def __init__(self, store: Store, keys: KeyManager, recipe: RowRecipe, deletions: Deletions, unseal: Unseal,
                 now: Callable[[], float]) -> None:
        self._store, self._keys, self._recipe, self._deletions = store, keys, recipe, deletions
        self._unseal, self._now = unseal, now

    def extend(self, chosen: ChosenRows, ttl: float) -> int:
        """Make the chosen live rows live at least ``ttl`` more; returns how many were extended. Rows the owner's
        ledger names are removed and never extended; if there were any, the rest is extended and committed, then
        IntegrityError says so. A ledger altered or older than the keyring's count extends nothing."""
        for _ in range(EPOCH_ATTEMPTS):
            moment = self._now()
            try:  # the epoch key is made, if new, outside any write transaction (keys/epochs/keys.py)
                return self._extend(chosen, ttl, self._recipe.epoch_for(expiry(moment, ttl), moment))
            except _EpochMoved:
                continue
        raise KeyUnavailable("the new expiry moved to another expiry epoch on every attempt; nothing was extended, "
                             "retry")

    def _extend(self, chosen: ChosenRows, ttl: float, put: SealingEpoch) -> int:
        """extend's one write transaction, the rows moved into ``put``'s epoch."""
        store, keys, deletions = self._store, self._keys, self._deletions
        user_id = chosen.user_id
        index = keys.index_key()
        owner_tag = index.owner_tag(user_id)
        floor = deletions.floor(owner_tag)
        extended = written_back = 0
        with store.transaction() as tx:
            ledger = deletions.checked(tx, index, owner_tag, floor)
            moment = self._now()  # after the write lock: a row that expired while we waited stays expired
            expires_at = expiry(moment, ttl)
            if keys.epochs.epoch_of_expiry(expires_at) != put.epoch:
                raise _EpochMoved
            if not self._recipe.epoch_recorded(put, keys.epoch_commitment(put.epoch)):
                raise KeyUnavailable(EPOCH_CLOSED)
            for row, sealed_summary in chosen.rows(tx, index, owner_tag, moment):
                if ledger.names(row.row_id):
                    written_back += tx.delete_row(row) is not None
                    continue
                if row.expires_at >= expires_at:
                    continue
                opened, metadata = self._unseal(user_id, row)
                plain, legacy = opened.summary(sealed_summary)
                longer = dataclasses.replace(metadata, expires_at=expires_at)
                tx.update_expiry(row, expires_at, *opened.reseal(
                    expires_at, longer.encode(), SummaryRecord.decode(plain, legacy).encode(), put))
                extended += 1
        if written_back:
            store.scrub()
        deletions.record(owner_tag, ledger.counter, floor)
        if written_back:
            raise IntegrityError(f"{written_back} row(s) of this turn that their owner had deleted were back in the "
                                 "database file (written back from an older copy): they were removed again and the "
                                 f"turn's {extended} other row(s) extended. Find out who can write the data "
                                 "directory")
        return extended
