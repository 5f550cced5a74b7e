"""The keys of expiry epochs in the OS keyring: one write-once entry per epoch, shared by every owner of the vault.

Service ``scratchvault/<vault_id hex>/epoch-key``, user ``<length>.<epoch>.<attempt>``, the password one key
(``scratchvault-key/1``). As with owner key versions (keys/keyring/owner_entries.py): an attempt is reserved in the
database before its entry is written, then under the key lock the reservation is checked to still stand, the
entry written and read back and its commitment recorded; only a recorded key is ever used, and an epoch holds
one, so two processes racing to make it end with one (the loser tombstones its attempt, never writes it). A
write given up that lands late can only bring back its own attempt, which is never recorded and is deleted by the
next sweep. Destruction tombstones first (committed), then deletes the entries, and finishes from the tombstones
after a keyring failure. Every sweep deletes only what an ended epoch, or a spare attempt next to a working key,
left; destruction also probes the names of newly ended epochs for entries the database no longer lists, and keeps
the keyring's "destroyed through" marker (keys/epochs/marks.py). threat_model.md, "Expiry epochs".
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field
from typing import NoReturn

from keys.blind_index import tags_equal
from keys.commitments import EpochRecords
from keys.epochs.epoch_key import EpochKey, epoch_name
from keys.epochs.lengths import EpochLengths
from keys.epochs.marks import PROBED, EpochMark
from keys.epochs.schedule import (
    DEFAULT_EPOCH_SECONDS,
    DEFAULT_SKEW_SECONDS,
    Epoch,
    check_length,
    check_skew,
    destroy_after,
    epoch_end,
    epoch_of,
    last_destroyable,
)
from keys.epochs.sweep import MAX_ATTEMPTS, Attempt, EpochSweeper
from keys.errors import InvalidArgument, KeyUnavailable, VaultError
from keys.keyring.cache import CacheLimits, KeyCache
from keys.keyring.edge import KeyringEdge
from keys.keyring.entries import parse_single_key

_REPLACED = ("the OS keyring returned a different key for an expiry epoch than the one this vault recorded (the "
             "entry was replaced, or this is another keyring); restore it from the keyring backup")
_MISSING = ("the key of an expiry epoch this vault recorded is missing from the OS keyring (wrong keyring, or the "
            "entry was deleted); restore the keyring from backup")
_UNRECORDED = ("the database did not record an expiry epoch's new key (a row it holds for the epoch conflicts: "
               "a writer of the database); the epoch gets no key")
_DESTROYED = "this expiry epoch's key was destroyed; it gets no other"


@dataclass(frozen=True, slots=True)
class Destruction:
    """What ``destroy_ended`` did: the epochs whose keys it destroyed; the attempts whose entries the keyring still
    holds because it failed (retried by the next call; doctor reports them); entries it found in the keyring under
    newly ended epochs that the database did not list (destroyed too); tombstones naming the recorded key of an
    epoch that has not ended (a writer of the database: never swept early); rows of the epoch tables no vault
    writes (left out)."""

    destroyed: list[Epoch]
    pending: list[Attempt]
    found_unlisted: list[Attempt] = field(default_factory=list)
    refused: list[Attempt] = field(default_factory=list)
    bad_rows: int = 0


OCCUPIED_ATTEMPTS = 3  # attempts reserved in a row when entries already hold their names


class _Occupied(KeyUnavailable):
    """An entry already holds the name of the attempt about to be written: the attempt is given up, never the
    entry (it may be the key live rows use, its records deleted by a writer of the database)."""


class EpochKeys:
    """Makes once, loads (checked against its commitment), caches and destroys the keys of expiry epochs."""

    __slots__ = ("_cache", "_keyring", "_lengths", "_lock", "_marks", "_probed", "_records", "_service", "_sweeper",
                 "_vault_id", "abandon_after", "destroyed_on_sight", "length", "skew")

    def __init__(self, keyring: KeyringEdge, vault_id: bytes, records: EpochRecords, *, cache: CacheLimits,
                 length: int = DEFAULT_EPOCH_SECONDS, skew: int = DEFAULT_SKEW_SECONDS) -> None:
        self._keyring, self._vault_id, self._records = keyring, vault_id, records
        self.length, self.skew = check_length(length), check_skew(skew)
        self._service = "scratchvault/" + vault_id.hex() + "/epoch-key"
        self._marks = EpochMark(keyring, self._service)
        self._probed = EpochMark(keyring, self._service, PROBED)  # ahead of _marks while a delete is stuck
        self._lengths = EpochLengths(keyring, self._service)
        self._sweeper = EpochSweeper(keyring, records, self._service, self.skew)
        self._cache: KeyCache[EpochKey] = KeyCache(cache.max_entries, cache.ttl_seconds)
        self._lock = threading.Lock()
        self.abandon_after = 2 * keyring.timeout + 60.0  # as owner key reservations (keys/manager.py)
        self.destroyed_on_sight = 0  # entries found where a reserved attempt was about to write (left, not deleted)

    def get(self, epoch: Epoch) -> EpochKey | None:
        """The recorded key of ``epoch`` (checked against its commitment), or None when it is destroyed: the database
        records none (never made, or closed), or its entry is gone and the keyring's marker says the epoch was
        destroyed (a restored backup of the database). A recorded key missing or replaced otherwise is
        KeyUnavailable."""
        cached = self._cache.get(epoch)
        if cached is not None:
            return cached
        recorded = self._records.epoch_commitment(*epoch)
        key = None if recorded is None else self._load_unless_destroyed(epoch, recorded)
        if key is not None:
            self._cache.put(epoch, key)
        return key

    def get_or_create(self, epoch: Epoch, now: float) -> EpochKey:
        """The key of ``epoch``, made now if it has none. An epoch that has ended at ``now`` gets none (cached or
        not), and one destroyed by any process (the database says closed, or the keyring's marker covers it) never
        gets one again; a cached key is used only while the database still records it."""
        if now >= epoch_end(epoch[1], epoch[0]):
            raise InvalidArgument("an expiry epoch that has ended gets no key")
        recorded = self._records.epoch_commitment(*epoch)
        if recorded is not None:
            cached = self._cache.get(epoch)
            key = cached if cached is not None and self._matches(epoch, cached, recorded) else \
                self._load_unless_destroyed(epoch, recorded)
            if key is None:
                raise InvalidArgument(_DESTROYED)
            self._cache.put(epoch, key)
            return key
        self._cache.invalidate(epoch)
        return self._create(epoch, now)

    def for_put(self, epoch: Epoch, now: float) -> EpochKey:
        """``get_or_create`` without its database read while the key is cached and the epoch has not ended at
        ``now``: for a caller that checks, in its own write transaction, that the key is still the recorded one
        (a put reads the commitment in the statement that takes its seq; ``still_recorded``)."""
        if now < epoch_end(epoch[1], epoch[0]):
            cached = self._cache.get(epoch)
            if cached is not None:
                return cached
        return self.get_or_create(epoch, now)

    def _create(self, epoch: Epoch, now: float) -> EpochKey:
        """Reserve, write and record a new key; cached only once its commitment is committed."""
        if self._marks.covers(*epoch):
            raise InvalidArgument(_DESTROYED)
        self._start_marker(epoch[0], now)
        for _ in range(OCCUPIED_ATTEMPTS):
            attempt = self._records.reserve_epoch(*epoch, now, now - self.abandon_after)
            if attempt is None:
                raise InvalidArgument(_DESTROYED)
            try:
                with self._records.locked():
                    key = self._write(epoch, attempt)
            except VaultError as error:  # a COMMIT that failed too: the entry may be written, the key is never used
                with contextlib.suppress(VaultError):
                    self._records.tombstone_epoch_attempt(*epoch, attempt)  # its entry goes after the epoch ends
                if isinstance(error, _Occupied):
                    continue
                raise
            self._cache.put(epoch, key)
            return key
        raise KeyUnavailable("entries already held the names of this expiry epoch's next attempts (late keyring "
                             "writes, or a database rolled back); nothing was written, retry")

    def _start_marker(self, length: int, now: float) -> None:
        """Before this vault's first key of a length: the marker set where a destruction at ``now`` would set it
        (the epochs a key could still be made for, and every later one, stay above it), so destruction probes every
        epoch that can have a key. Best effort, as every marker write."""
        first = last_destroyable(now, length, self.skew)
        with contextlib.suppress(KeyUnavailable):
            if first >= 0 and self._marks.known(length) is None and self._marks.read(length) is None:
                self._marks.raise_to(length, first)

    def _write(self, epoch: Epoch, attempt: int) -> EpochKey:
        """Under the key lock: use the key another process recorded meanwhile (tombstoning our attempt unwritten),
        else check the reservation still stands, write the entry once, record its commitment and read it back:
        a key the database does not record as the epoch's (a conflicting row) is never returned."""
        recorded = self._records.epoch_commitment(*epoch)
        if recorded is not None:
            self._records.tombstone_epoch_attempt(*epoch, attempt)
            return self._load(epoch, *recorded)
        if not self._records.epoch_pending(*epoch, attempt):
            raise KeyUnavailable("an expiry epoch's key was destroyed or abandoned while it was being made; retry")
        if self._records.recorded_attempt(*epoch) is not None:  # a dead key row: only a writer of the database
            raise KeyUnavailable(_UNRECORDED)  # leaves one; it would make the record a no-op (checked again below)
        if attempt > MAX_ATTEMPTS:  # destruction probes no further: an entry past it could outlive its epoch
            raise KeyUnavailable("this expiry epoch's key attempts are used up (more failed writes than any keyring "
                                 "gives, or reservations planted by a writer of the database); its rows cannot be "
                                 "stored. Check the database with 'scratchvault doctor'")
        self._lengths.before_key(*epoch)  # the keyring knows of it first: gc probes it whatever this vault's length
        name, key = epoch_name(epoch[0], epoch[1], attempt), EpochKey.generate()
        if self._keyring.get(self._service, name) is not None:  # a late write, or a database rolled back (its
            self._count(1)  # records of a live key deleted): never deleted here, and never overwritten
            raise _Occupied("an entry already holds this expiry epoch attempt's name")
        self._keyring.set(self._service, name, key.entry())
        self._records.record_epoch_commitment(*epoch, attempt, key.commitment(self._vault_id, *epoch))
        recorded = self._records.epoch_commitment(*epoch)
        if recorded is None or recorded[0] != attempt or not self._matches(epoch, key, recorded):
            raise KeyUnavailable(_UNRECORDED)  # the caller tombstones the attempt: its entry is swept
        return key

    def destroyed(self, epoch: Epoch) -> bool:
        """Whether the keyring's marker says ``epoch``'s key was destroyed (so a row naming it is gone, not tampered
        with, even when the clock or a restored database says otherwise)."""
        return self._marks.covers(*epoch)

    def still_recorded(self, epoch: Epoch, key: EpochKey, recorded: tuple[int, bytes] | None) -> bool:
        """Whether ``recorded`` (the epoch's live commitment, read by a put inside its own write transaction) is
        still ``key``'s: False once the epoch was closed or its key replaced (the key is then dropped from the
        cache, and the put must not wrap under it)."""
        if recorded is not None and self._matches(epoch, key, recorded):
            return True
        self._cache.invalidate(epoch)
        return False

    def _matches(self, epoch: Epoch, key: EpochKey, recorded: tuple[int, bytes]) -> bool:
        return tags_equal(recorded[1], key.commitment(self._vault_id, *epoch))

    def _load_unless_destroyed(self, epoch: Epoch, recorded: tuple[int, bytes]) -> EpochKey | None:
        """The recorded key, or None when its entry is missing or another and the marker says it was destroyed."""
        try:
            return self._load(epoch, *recorded)
        except KeyUnavailable:
            if self._marks.covers(*epoch):
                return None
            raise

    def _load(self, epoch: Epoch, attempt: int, recorded: bytes) -> EpochKey:
        """The recorded attempt's entry, checked against its commitment (the caller caches it)."""
        stored = self._keyring.get(self._service, epoch_name(epoch[0], epoch[1], attempt))
        if stored is None:
            raise KeyUnavailable(_MISSING)
        key = EpochKey(parse_single_key(stored, "expiry epoch key"))
        if not self._matches(epoch, key, (attempt, recorded)):
            raise KeyUnavailable(_REPLACED)
        return key

    def destroy_ended(self, now: float) -> Destruction:
        """Destroy the keys of every epoch that ended more than the skew allowance before ``now``: tombstones
        committed first (with those of entries found under newly ended epochs that the database no longer lists),
        then the entries deleted (with those of every attempt destroyed before and not yet known gone), then the
        keyring's marker raised, never past an epoch whose entry the keyring failed to delete: the next call probes
        it again, so a swept flag a writer sets never hides an entry. A keyring that fails leaves its attempts
        pending, retried by the next call."""
        destroyed = self._records.close_epochs(now - self.skew)
        found, probed = self._probe_lengths(now)
        for epoch in destroyed + [(length, number) for length, number, _ in found]:
            self._cache.invalidate(epoch)
        pending, refused = self._sweeper.sweep(now)
        highest = {length: number for length, number in sorted(destroyed) if length not in probed} | {
            length: number for length, number in probed.items() if number is not None}
        for length, number in highest.items():  # never past an epoch whose entry is still there: the next probe
            below = [epoch - 1 for other, epoch, _ in pending if other == length]  # looks at it again, whatever
            self._marks.raise_to(length, min([number, *below]))  # the database says of it
            if below and length in probed:  # the cursor moves on past it, so later epochs are still probed
                self._probed.raise_to(length, number)
        return Destruction(destroyed, pending, found, refused, self._records.bad_epoch_rows())

    def sweep(self, now: float | None = None) -> list[Attempt]:
        """Delete the entries of destroyed attempts not yet known gone, of epochs ended (plus the skew allowance) at
        ``now``: none of an epoch that has not; returns those the keyring failed to delete (left unswept)."""
        return self._sweeper.sweep(time.time() if now is None else now)[0]

    def _probe_lengths(self, now: float) -> tuple[list[Attempt], dict[int, int | None]]:
        """Probe this vault's length and every other one it ever made keys for (up to the last epoch it made one
        for): what was found, and by length the last new epoch probed (None: none)."""
        found, probed = self._sweeper.probe(now, self.length, self._marks, self._probed)
        reached = {self.length: probed}
        for length, until in self._lengths.others(self.length):
            more, reached[length] = self._sweeper.probe(now, length, self._marks, self._probed, until)
            found += more
        return found, reached

    def overdue(self, now: float) -> list[Epoch]:
        """Epochs whose key should be gone at ``now`` and is not: a recorded key past its epoch's end and the skew
        allowance (no gc ran), or a destroyed one whose entry the keyring has not yet deleted (for doctor)."""
        live = [epoch for epoch in self._records.live_epochs() if destroy_after(epoch[1], epoch[0], self.skew) <= now]
        unswept = {(length, epoch) for length, epoch, _, _ in self._records.epoch_tombstones(unswept_only=True)
                   if destroy_after(epoch, length, self.skew) <= now}
        return sorted(set(live) | unswept)

    def bad_rows(self) -> int:
        """Rows of the epoch tables no vault writes (a writer of the database), left out of everything (doctor)."""
        return self._records.bad_epoch_rows()

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

    def __reduce__(self) -> NoReturn:
        raise TypeError("key material cannot be pickled")
