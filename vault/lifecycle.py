"""Key lifecycle of the Vault: rotation, rewrap, retirement, and crypto-shredding an owner.

Each step that changes an owner's keyset runs under the database write lock, so two processes never
derive two different "next" versions, and a put never wraps a data key under a version being retired.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from keys.envelope import SUMMARY_V2, RowContext, summary_aad_v2, wrap_aad
from keys.errors import IntegrityError, InvalidArgument, KeyUnavailable
from vault.audit import Audited, audited
from vault.inputs import check_identifier, check_int, check_progress

if TYPE_CHECKING:
    from keys import KeyManager, OwnerKeyset
    from vault.store import RowHeader, SqliteStore

REWRAP_BATCH = 500  # rows per transaction: a killed rewrap loses at most one batch of work, never data


class KeyLifecycle(Audited):
    """Mixed into Vault: the key management an operator runs (see README, "Key management"); each call
    leaves an audit record (vault/audit.py)."""

    _keys: KeyManager
    _store: SqliteStore
    _integrity_guard: Callable[[object], AbstractContextManager[None]]

    @audited("rotate")
    def rotate_owner_key(self, user_id: str) -> int:
        """Add a new key version for an owner and make it primary: new rows use it, old rows still read.
        Returns the new version. Run ``rewrap`` next, then ``retire_old_key_versions``."""
        check_identifier(user_id, "user_id")
        with self._store.transaction():
            return self._keys.rotate_owner_keyset(user_id).primary

    @audited("rewrap")
    def rewrap(self, user_id: str | None = None, *, batch: int = REWRAP_BATCH,
               progress: Callable[[int], None] | None = None) -> int:
        """Re-wrap the data keys of rows under older versions with the primary one, in batches (resumable:
        a killed rewrap is finished by running it again). Content is not touched: the cost is O(rows).
        ``user_id=None`` rewraps every owner the vault knows. Returns how many rows were re-wrapped;
        ``progress`` is called with the running total after each committed batch."""
        check_int(batch, "batch", 1, 100_000)
        check_progress(progress)
        owners = self._keys.registered_owner_names() if user_id is None else [check_identifier(user_id, "user_id")]
        done = 0
        for owner in owners:
            done = self._rewrap_owner(owner, batch, done, progress)
        self._store.checkpoint()  # old wrapped keys must not linger in the WAL
        return done

    def _rewrap_owner(self, user_id: str, batch: int, done: int, progress: Callable[[int], None] | None) -> int:
        """Rewrap one owner's rows; returns ``done`` plus how many."""
        owner_tag = self._keys.index_key().owner_tag(user_id)
        while True:
            with self._store.transaction() as tx:
                keyset = self._keys.owner_keyset(user_id, refresh=True)
                if keyset is None and not self._store.owner_has_rows(owner_tag):
                    return done  # an owner without keys and without rows has nothing to re-wrap
                if keyset is None:
                    raise KeyUnavailable("the OS keyring holds no keys for this owner although the vault holds "
                                         "rows for them; restore the keyring from backup")
                rows = self._store.rows_to_rewrap(tx, owner_tag, keyset.primary, batch)
                for header, sealed in rows:
                    row = header.row_id.hex()
                    with self._integrity_guard(row):  # counted and logged with the row id
                        try:
                            context = RowContext(self._keys.vault_id, header.row_id)
                            data_key = keyset.unwrap(header.key_version, header.wrapped_key,
                                                     wrap_aad(context, user_id, header.key_version))
                            wrapped = keyset.wrap(data_key, wrap_aad(context, user_id, keyset.primary))
                            resealed = _reseal_summary(keyset, context, header, sealed)
                        except IntegrityError:
                            raise IntegrityError(
                                f"row {row} fails authentication (its wrapped key or summary was altered), so "
                                "rewrap stopped and rolled back its current batch. Restore the database from "
                                "backup, or remove the row: its owner can delete it while its wrapped key and "
                                "metadata are intact, else gc removes it once it expires. Then run rewrap again"
                            ) from None
                    self._store.update_wrapped_key(tx, header.seq, keyset.primary, wrapped, resealed)
            done += len(rows)
            if progress is not None:
                progress(done)
            if len(rows) < batch:
                return done

    @audited("retire")
    def retire_old_key_versions(self, user_id: str) -> int:
        """Remove from the keyring every non-primary version no row uses; refuse (InvalidArgument, nothing
        removed) while any row still needs one. Returns how many versions were removed. A backup taken
        before the rewrap can no longer be read for rows that only the retired versions unwrapped."""
        check_identifier(user_id, "user_id")
        owner_tag = self._keys.index_key().owner_tag(user_id)
        with self._store.transaction():
            keyset = self._keys.owner_keyset(user_id, refresh=True)
            if keyset is None:
                raise KeyUnavailable("the OS keyring holds no keys for this owner; nothing to retire")
            old = set(keyset.versions) - {keyset.primary}
            in_use = self._store.key_versions_in_use(owner_tag)
            needed = {version: count for version, count in in_use.items() if version in old}
            if needed:
                raise InvalidArgument(
                    f"{sum(needed.values())} row(s) still use key version(s) {sorted(needed)}; run rewrap first")
            if old:
                self._keys.retire_owner_versions(user_id, old)
        return len(old)

    @audited("shred")
    def shred_owner(self, user_id: str, *, progress: Callable[[int], None] | None = None) -> int:
        """Crypto-shred an owner: delete their keyset from the keyring first (every copy of their rows, in
        backups or free pages, becomes unreadable), then every row of theirs. Other owners are untouched.
        Safe to run again after an interruption. Returns how many rows were deleted; ``progress`` is called
        with the running total after each committed batch."""
        check_identifier(user_id, "user_id")
        check_progress(progress)
        with self._store.transaction():  # serialised with rotate/retire, which read-modify-write the keyset
            self._keys.delete_owner_keyset(user_id)
        return self._store.delete_owner_rows(self._keys.index_key().owner_tag(user_id), progress)


def _reseal_summary(keyset: OwnerKeyset, context: RowContext, header: RowHeader, sealed: bytes | None) -> bytes | None:
    """A format 2 summary sealed under the primary version's turn key instead of the row's old version's (the
    record itself is not parsed); None for a format 1 summary, which the row's DEK seals whatever the version."""
    if not sealed:
        raise IntegrityError("a row's summary is missing")
    if sealed[0] != SUMMARY_V2:
        return None
    vault_id, primary = context.vault_id, keyset.primary
    old = summary_aad_v2(context, header.owner_tag, header.turn_tag, header.expires_at, header.size_bytes,
                         header.key_version)
    plain = keyset.turn_key(header.key_version, vault_id, header.turn_tag).open_summary(sealed, old)
    new = summary_aad_v2(context, header.owner_tag, header.turn_tag, header.expires_at, header.size_bytes, primary)
    return keyset.turn_key(primary, vault_id, header.turn_tag).seal_summary(plain, new)
