"""Key lifecycle of a vault: rotation, rewrap, retirement, and crypto-shredding an owner.

Each step that changes an owner's keyset runs inside a write transaction, so two processes never derive two
different "next" versions, and a put never wraps a data key under a version being retired. The key commitments
those steps record join that transaction (vault/storage/base.py).
"""

from __future__ import annotations

from collections.abc import Callable

from keys import NO_OWNER_KEYS, KeyManager, OwnerKeyset, RowRecipe, SealingEpoch, epoch_end, stored_epoch
from vault.counters import Counters
from vault.errors import IntegrityError, InvalidArgument, KeyUnavailable, NotFound
from vault.inputs import check_identifier, check_int, check_progress
from vault.storage import Store, StoredRow, WriteTx


class _NeedEpoch(Exception):
    """A row moving into an epoch whose key is not made yet (made outside the batch's transaction)."""

    def __init__(self, expires_at: float) -> None:
        super().__init__("an expiry epoch key is needed")
        self.expires_at = expires_at


REWRAP_BATCH = 500  # rows per transaction: a killed rewrap loses at most one batch of work, never data


class KeyLifecycle:
    """The key management an operator runs (README, "Key management"); the Vault audits each call."""

    def __init__(self, store: Store, keys: KeyManager, recipe: RowRecipe, counters: Counters,
                 now: Callable[[], float]) -> None:
        self._store, self._keys, self._recipe, self._counters, self._now = store, keys, recipe, counters, now

    def rotate(self, user_id: str) -> int:
        """Add a new key version for an owner and make it primary; returns it."""
        check_identifier(user_id, "user_id")
        return self._keys.rotate_owner_keyset(user_id).primary  # reserves, then writes under the write lock

    def rewrap(self, user_id: str | None, batch: int, progress: Callable[[int], None] | None) -> int:
        """Re-wrap rows under older versions with the primary one, and rows under no expiry epoch into the epoch of
        their expiry, in committed batches; returns how many."""
        check_int(batch, "batch", 1, 100_000)
        check_progress(progress)
        owners = self._keys.registered_owner_names() if user_id is None else [check_identifier(user_id, "user_id")]
        done = 0
        for owner in owners:
            done = self._rewrap_owner(owner, batch, done, progress)
        self._store.scrub()  # old wrapped keys must not linger in the store's log
        return done

    def _rewrap_owner(self, user_id: str, batch: int, done: int, progress: Callable[[int], None] | None) -> int:
        """Rewrap one owner's rows; returns ``done`` plus how many."""
        owner_tag = self._keys.index_key().owner_tag(user_id)
        while True:
            try:
                rows = self._rewrap_batch(user_id, owner_tag, batch)
            except _NeedEpoch as need:  # a row of format 1 moves into an epoch that has no key yet: made outside
                self._recipe.epoch_for(need.expires_at, self._now())  # any transaction, then the batch runs again
                continue
            if rows is None:
                return done  # an owner without keys and without rows has nothing to re-wrap
            done += len(rows)
            if progress is not None:
                progress(done)
            if len(rows) < batch:
                return done

    def _rewrap_batch(self, user_id: str, owner_tag: bytes, batch: int) -> list | None:
        """One committed batch: the rows re-wrapped or removed (None: an owner without keys or rows)."""
        with self._store.transaction() as tx:
            keyset = self._keys.owner_keyset(user_id, refresh=True)
            if keyset is None and not tx.owner_has_rows(owner_tag):
                return None
            if keyset is None:
                raise KeyUnavailable(f"{NO_OWNER_KEYS} although the vault holds rows for them; restore the "
                                     "keyring from backup")
            rows = tx.rows_to_rewrap(owner_tag, keyset.primary, batch)
            for row, sealed_summary in rows:
                self._rewrap_row(tx, keyset, user_id, row, sealed_summary)
        return rows

    def _rewrap_epoch(self, row: StoredRow) -> SealingEpoch | None:
        """The epoch a re-wrapped row goes under: its own (rewrap keeps it), else that of its expiry; None when its
        key is gone, or a format 1 row's epoch has ended (its time is over: the row is removed, as gc would)."""
        own = stored_epoch(row.wrapped_key, row.expires_at)
        if own is not None:  # NotFound once destroyed; IntegrityError for a live epoch without a key (tampering)
            return SealingEpoch(own, self._recipe.epoch_key(own))
        epoch = self._keys.epochs.epoch_of_expiry(row.expires_at)
        key = self._keys.epochs.get(epoch)
        if key is not None:
            return SealingEpoch(epoch, key)
        if epoch_end(epoch[1], epoch[0]) <= self._now():
            return None
        raise _NeedEpoch(row.expires_at)

    def _rewrap_row(self, tx: WriteTx, keyset: OwnerKeyset, user_id: str, row: StoredRow,
                    sealed_summary: bytes | None) -> None:
        """Re-wrap one row inside the batch's transaction; a row that fails authentication stops the batch."""
        row_hex = row.row_id.hex()
        with self._counters.integrity_guard(row_hex):  # counted and logged with the row id
            try:
                epoch = self._rewrap_epoch(row)
                if epoch is None:
                    raise NotFound()
                wrapped, resealed = self._recipe.rewrap(keyset, user_id, row, sealed_summary, epoch)
            except NotFound:  # its epoch key is gone: unreadable anywhere, and past its time
                tx.delete_row(row)
                return
            except IntegrityError:
                raise IntegrityError(
                    f"row {row_hex} fails authentication (its wrapped key or summary was altered), so rewrap "
                    "stopped and rolled back its current batch. Restore the database from backup, or remove the "
                    "row: its owner can delete it while its wrapped key and metadata are intact, else gc removes "
                    "it once it expires. Then run rewrap again"
                ) from None
        tx.update_wrapped_key(row, keyset.primary, wrapped, resealed)

    def retire(self, user_id: str) -> int:
        """Remove every non-primary version no row uses; refuse (nothing removed) while a row needs one."""
        check_identifier(user_id, "user_id")
        owner_tag = self._keys.index_key().owner_tag(user_id)
        with self._store.transaction():
            keyset = self._keys.owner_keyset(user_id, refresh=True)
            if keyset is None:
                raise KeyUnavailable(f"{NO_OWNER_KEYS}; nothing to retire")
            old = set(keyset.versions) - {keyset.primary}
            in_use = self._store.commitments.key_versions_in_use(owner_tag)
            needed = {version: count for version, count in in_use.items() if version in old}
            if needed:
                raise InvalidArgument(
                    f"{sum(needed.values())} row(s) still use key version(s) {sorted(needed)}; run rewrap first")
            destroyed = self._keys.retire_owner_versions(user_id, old) if old else set()
        # their entries, after the tombstones commit (again on a rerun, if it failed): those this call destroyed
        # whatever the database now says of them, and those of every unswept tombstone
        self._keys.sweep(owner_tag, destroyed=destroyed | old)
        return len(old)

    def shred(self, user_id: str, progress: Callable[[int], None] | None) -> int:
        """Tombstone every key version of the owner, delete their keyring entries, then every row of theirs;
        returns how many rows. Run again after a failure, it finishes (the tombstones say what to delete)."""
        check_identifier(user_id, "user_id")
        check_progress(progress)
        # under the write lock, serialised with rotation and first keys; on a full disk the store makes room
        owner_tag, destroyed = self._store.deleting(lambda _tx: self._keys.destroy_owner(user_id))
        self._keys.sweep(owner_tag, destroyed=destroyed)
        self._keys.sweep_unlisted(owner_tag, destroyed)  # and any entry the database no longer lists (a writer hid it)
        with self._counters.integrity_guard():
            return self._store.delete_owner_rows(owner_tag, progress)
