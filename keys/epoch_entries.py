"""The keys of expiry epochs in the OS keyring: one write-once entry per epoch, shared by every owner of the vault.

Service ``scratchvault/<vault_id hex>/epoch-key``, user ``<length>.<epoch>.<attempt>``, the password one key
(``scratchvault-key/1``). As with owner key versions (keys/owner_entries.py): an attempt is reserved in the
database before its entry is written, then under the key lock the reservation is checked to still stand, the
entry written and read back and its commitment recorded; only a recorded key is ever used, and an epoch holds
one, so two processes racing to make it end with one (the loser tombstones its attempt, never writes it). A
write given up that lands late can only bring back its own attempt, which is never recorded and is deleted by the
next sweep. Destruction tombstones first (committed), then deletes the entries, and finishes from the tombstones
after a keyring failure. threat_model.md, "Expiry epochs".
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass

from keys.blind_index import tags_equal
from keys.cache import KeyCache
from keys.commitments import EpochRecords
from keys.epochs import (
    DEFAULT_EPOCH_SECONDS,
    DEFAULT_SKEW_SECONDS,
    EpochKey,
    check_length,
    check_skew,
    destroy_after,
    epoch_end,
    epoch_name,
    epoch_of,
)
from keys.errors import InvalidArgument, KeyUnavailable, VaultError
from keys.keyring_edge import KeyringEdge
from keys.keyset import parse_single_key

Epoch = tuple[int, int]  # (length in seconds, epoch number)
_REPLACED = ("the OS keyring returned a different key for an expiry epoch than the one this vault recorded (the "
             "entry was replaced, or this is another keyring); restore it from the keyring backup")
_MISSING = ("the key of an expiry epoch this vault recorded is missing from the OS keyring (wrong keyring, or the "
            "entry was deleted); restore the keyring from backup")


@dataclass(frozen=True, slots=True)
class Destruction:
    """What ``destroy_ended`` did: the epochs whose keys it destroyed, and the attempts whose entries the keyring
    still holds because it failed (retried by the next call; doctor reports them)."""

    destroyed: list[Epoch]
    pending: list[tuple[int, int, int]]


class EpochKeys:
    """Makes once, loads (checked against its commitment), caches and destroys the keys of expiry epochs."""

    __slots__ = ("_cache", "_keyring", "_lock", "_records", "_service", "_vault_id", "abandon_after",
                 "destroyed_on_sight", "length", "skew")

    def __init__(self, keyring: KeyringEdge, vault_id: bytes, records: EpochRecords, *, cache_ttl: float,
                 cache_size: int, length: int = DEFAULT_EPOCH_SECONDS, skew: int = DEFAULT_SKEW_SECONDS) -> None:
        self._keyring, self._vault_id, self._records = keyring, vault_id, records
        self.length, self.skew = check_length(length), check_skew(skew)
        self._service = "scratchvault/" + vault_id.hex() + "/epoch-key"
        self._cache: KeyCache[EpochKey] = KeyCache(cache_size, cache_ttl)
        self._lock = threading.Lock()
        self.abandon_after = 2 * keyring.timeout + 60.0  # as owner key reservations (keys/manager.py)
        self.destroyed_on_sight = 0  # entries found where a reserved attempt was about to write, deleted first

    def get(self, epoch: Epoch) -> EpochKey | None:
        """The recorded key of ``epoch`` (checked against its commitment), or None when the database records none:
        never made, or destroyed. A recorded key missing from the keyring, or another key there, is
        KeyUnavailable."""
        cached = self._cache.get(epoch)
        if cached is not None:
            return cached
        recorded = self._records.epoch_commitment(*epoch)
        return None if recorded is None else self._load(epoch, *recorded)

    def get_or_create(self, epoch: Epoch, now: float) -> EpochKey:
        """The key of ``epoch``, made now if it has none. An epoch that has ended at ``now`` gets no new key, and one
        closed (its key destroyed, by any process) never gets one again."""
        found = self.get(epoch)
        if found is not None:
            return found
        if now >= epoch_end(epoch[1], epoch[0]):
            raise InvalidArgument("an expiry epoch that has ended gets no key")
        attempt = self._records.reserve_epoch(*epoch, now, now - self.abandon_after)
        if attempt is None:
            raise InvalidArgument("this expiry epoch's key was destroyed; it gets no other")
        try:
            with self._records.locked():
                return self._write(epoch, attempt)
        except KeyUnavailable:
            with contextlib.suppress(VaultError):
                self._records.tombstone_epoch_attempt(*epoch, attempt)
            raise

    def _write(self, epoch: Epoch, attempt: int) -> EpochKey:
        """Under the key lock: use the key another process recorded meanwhile (tombstoning our attempt unwritten),
        else check the reservation still stands, write the entry once, and record its commitment."""
        recorded = self._records.epoch_commitment(*epoch)
        if recorded is not None:
            self._records.tombstone_epoch_attempt(*epoch, attempt)
            return self._load(epoch, *recorded)
        if not self._records.epoch_pending(*epoch, attempt):
            raise KeyUnavailable("an expiry epoch's key was destroyed or abandoned while it was being made; retry")
        name, key = epoch_name(epoch[0], epoch[1], attempt), EpochKey.generate()
        if self._keyring.get(self._service, name) is not None:  # a late write of an attempt rolled back by a writer
            self._keyring.delete(self._service, name)
            self._count(1)
        self._keyring.set(self._service, name, key.entry())
        self._records.record_epoch_commitment(*epoch, attempt, key.commitment(self._vault_id, *epoch))
        self._cache.put(epoch, key)
        return key

    def _load(self, epoch: Epoch, attempt: int, recorded: bytes) -> EpochKey:
        """The recorded attempt's entry, checked against its commitment, then cached."""
        stored = self._keyring.get(self._service, epoch_name(epoch[0], epoch[1], attempt))
        if stored is None:
            raise KeyUnavailable(_MISSING)
        key = EpochKey(parse_single_key(stored, "expiry epoch key"))
        if not tags_equal(recorded, key.commitment(self._vault_id, *epoch)):
            raise KeyUnavailable(_REPLACED)
        self._cache.put(epoch, key)
        return key

    def destroy_ended(self, now: float) -> Destruction:
        """Destroy the keys of every epoch that ended more than the skew allowance before ``now``: tombstones
        committed first, then the entries deleted (with those of every attempt destroyed before and not yet known
        gone). A keyring that fails leaves its attempts pending, retried by the next call."""
        destroyed = self._records.close_epochs(now - self.skew)
        for epoch in destroyed:
            self._cache.invalidate(epoch)
        return Destruction(destroyed, self.sweep())

    def sweep(self) -> list[tuple[int, int, int]]:
        """Delete the entries of destroyed attempts not yet known gone; returns those the keyring failed to
        delete (left unswept)."""
        swept, pending = [], []
        for length, epoch, attempt, _ in self._records.epoch_tombstones(unswept_only=True):
            try:
                self._keyring.delete(self._service, epoch_name(length, epoch, attempt))
            except KeyUnavailable:
                pending.append((length, epoch, attempt))
            else:
                swept.append((length, epoch, attempt))
        self._records.mark_epochs_swept(swept)
        return pending

    def overdue(self, now: float) -> list[Epoch]:
        """Epochs whose key should be gone at ``now`` and is not: a recorded key past its epoch's end and the skew
        allowance (no gc ran), or a destroyed one whose entry the keyring has not yet deleted (for doctor)."""
        live = [epoch for epoch in self._records.live_epochs() if destroy_after(epoch[1], epoch[0], self.skew) <= now]
        unswept = {(length, epoch) for length, epoch, _, _ in self._records.epoch_tombstones(unswept_only=True)}
        return sorted(set(live) | unswept)

    def epoch_of_expiry(self, expires_at: float) -> Epoch:
        """The epoch (of this vault's length) an expiry falls in."""
        return (self.length, epoch_of(expires_at, self.length))

    def _count(self, found: int) -> None:
        with self._lock:
            self.destroyed_on_sight += found

    def clear(self) -> None:
        """Drop every cached epoch key (on close)."""
        self._cache.clear()

    def __repr__(self) -> str:
        return f"<EpochKeys length={self.length} skew={self.skew}>"

    def __reduce__(self) -> object:
        raise TypeError("key material cannot be pickled")
