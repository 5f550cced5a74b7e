"""Deleting the keyring entries of destroyed expiry-epoch attempts, and looking for entries the database no longer
lists (keys/epochs/keys.py; threat_model.md, "Expiry epochs").

* A sweep deletes the entry of an unswept tombstone once its epoch has ended (plus the skew allowance). Before
  then only a spare attempt goes (a lost race, a failed write): one whose epoch's recorded key is another attempt
  that loads and checks out. A tombstone naming the recorded key of an epoch that has not ended is a writer of the
  database asking for a live key to be erased from every copy: never swept early, reported.
* A probe asks the keyring for the names of epochs that ended since the "destroyed through" marker
  (keys/epochs/marks.py): every attempt from 1 to MAX_ATTEMPTS, whatever the database lists (a writer can plant
  records that number the vault's attempt past anything it lists later, then delete them). No entry is ever written
  for an attempt above MAX_ATTEMPTS (keys/epochs/keys.py refuses it), so the probe covers every entry the vault
  can have made. What it finds is tombstoned and its epoch closed, then swept.
"""

from __future__ import annotations

from keys.commitments import EpochRecords
from keys.epochs.epoch_key import epoch_name
from keys.epochs.marks import EpochMark
from keys.epochs.schedule import destroy_after, last_destroyable
from keys.errors import KeyUnavailable, VaultError
from keys.keyring.edge import KeyringEdge

Attempt = tuple[int, int, int]  # (length, epoch number, attempt)
MAX_ATTEMPTS = 8  # the highest attempt whose entry is ever written, and so what every probe of an epoch asks for
PROBE_BATCH = 48  # newly ended epochs probed by one destruction at most; the next one goes on from the marker
# how far back a probe with no marker at all looks: the default longest row lifetime (max_ttl_seconds,
# vault/opening.py). A vault sets its marker before its first key of a length (EpochKeys._start_marker), so only
# a marker the keyring lost leaves the probe to this bound
MAX_LIFETIME_SECONDS = 30 * 86400


def _current(marks: EpochMark, length: int, target: int) -> int | None:
    """A marker's value, from this process's memory when it is already at ``target``, else from the keyring."""
    value = marks.known(length)
    return value if value is not None and value >= target else marks.read(length)


class EpochSweeper:
    """The keyring side of destroying epoch keys: sweeps tombstoned attempts and probes newly ended epochs."""

    __slots__ = ("_keyring", "_records", "_service", "_skew")

    def __init__(self, keyring: KeyringEdge, records: EpochRecords, service: str, skew: int) -> None:
        self._keyring, self._records, self._service, self._skew = keyring, records, service, skew

    def sweep(self, now: float) -> tuple[list[Attempt], list[Attempt]]:
        """Delete the entries of unswept tombstones that may go at ``now``; returns (the attempts the keyring
        failed to delete, the tombstones refused as naming a live epoch's recorded key)."""
        swept, pending, refused = [], [], []
        for length, epoch, attempt, _ in self._records.epoch_tombstones(unswept_only=True):
            if destroy_after(epoch, length, self._skew) > now:  # left until its epoch ends (_names_live_key)
                if self._names_live_key(length, epoch, attempt):
                    refused.append((length, epoch, attempt))
                continue
            try:
                self._keyring.delete(self._service, epoch_name(length, epoch, attempt))
            except KeyUnavailable:
                pending.append((length, epoch, attempt))
            else:
                swept.append((length, epoch, attempt))
        self._records.mark_epochs_swept(swept)
        return pending, refused

    def _names_live_key(self, length: int, epoch: int, attempt: int) -> bool:
        """Whether a tombstone of an epoch that has not ended names its recorded key (tampering, reported). No entry
        of such an epoch is deleted: the database alone cannot tell a spare attempt from the key live rows use (a
        writer can delete that key's record, so that another attempt is recorded beside it), and an entry kept
        until its epoch ends costs nothing but its place in the keyring."""
        try:
            return self._records.recorded_attempt(length, epoch) == attempt
        except VaultError:  # its row malformed
            return False

    def probe(self, now: float, length: int, marks: EpochMark, probed: EpochMark,
              until: int | None = None) -> tuple[list[Attempt], int | None]:
        """Look for entries of epochs of ``length`` ended (plus the skew allowance) since the probe's cursor (the
        probed-through marker, else the destroyed-through one), and again in the epochs between the two, where an
        entry the keyring refused to delete stays whatever the database says of it; tombstone and close what is
        found; ``until``: no key of a later epoch of this length was ever made. Returns (what was found, the last new
        epoch probed; None when no new epoch was probed)."""
        target = last_destroyable(now, length, self._skew)
        if until is not None:
            target = min(target, until)
        try:
            marker = _current(marks, length, target)
            if marker is not None and marker >= target:  # nothing ended since, and nothing stuck (the marker
                return [], None  # stays below an epoch whose entry the keyring refused to delete)
            cursor = -1 if marker is None else marker  # the cursor can be ahead only if the marker is more than one
            if marker is None or marker < target - 1:  # epoch behind (a missed gc, or an entry stuck): ask for it
                cursor = max(cursor, _current(probed, length, target) or -1)
        except KeyUnavailable:
            return [], None
        if marker is None and cursor < 0:
            oldest = self._records.oldest_epoch(length)
            first = -1 if oldest is None else max(oldest, target - MAX_LIFETIME_SECONDS // length - 1)
        else:
            first = cursor + 1
        last = min(target, first + PROBE_BATCH - 1)
        gap = [] if marker is None else list(range(marker + 1, min(cursor, marker + PROBE_BATCH) + 1))
        new = list(range(first, last + 1)) if 0 <= first <= last else []
        if not gap and not new:
            return [], None
        unswept = {(epoch, attempt) for other, epoch, attempt, _ in self._records.epoch_tombstones(unswept_only=True)
                   if other == length}
        found: list[Attempt] = []
        probed_to = None
        for epoch in gap + new:
            try:
                found += self._probe_epoch(length, epoch, unswept)
            except KeyUnavailable:
                break
            probed_to = epoch if epoch >= first else probed_to
        self._records.close_found(found)
        return found, probed_to

    def _probe_epoch(self, length: int, epoch: int, unswept: set[tuple[int, int]]) -> list[Attempt]:
        """The entries of one ended epoch the keyring holds and no unswept tombstone will delete: attempts 1 to
        MAX_ATTEMPTS, each asked for."""
        found: list[Attempt] = []
        for attempt in range(1, MAX_ATTEMPTS + 1):
            if (epoch, attempt) not in unswept and \
                    self._keyring.get(self._service, epoch_name(length, epoch, attempt)) is not None:
                found.append((length, epoch, attempt))
        return found

    def __repr__(self) -> str:
        return "<EpochSweeper>"
