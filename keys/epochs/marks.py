"""The keyring's own record of how far expiry epochs have been destroyed: one entry per epoch length, user
``<E>.destroyed-through`` in the epoch keys' service, holding the highest epoch number of that length whose key
destruction was committed, whose keyring names were probed, and whose entries are all gone (keys/epochs/keys.py).
It lives outside the database, so a restored backup of the database, or a writer of it, cannot move it back: a row
whose epoch is at or below it and whose key is gone is expired (NotFound), not a missing key (threat_model.md,
"Expiry epochs").
"""

from __future__ import annotations

import threading

from keys.errors import KeyUnavailable
from keys.keyring.edge import KeyringEdge
from keys.keyring.secret import Secret

MARKER = "destroyed-through"
_MAX_DIGITS = 19  # 2**63 - 1 has 19 decimal digits


PROBED = "probed-through"  # the probe's cursor: how far ended epochs' names were looked for, whatever is pending


def marker_name(length: int, kind: str = MARKER) -> str:
    """The keyring user name of the marker of one epoch length (never a key's ``<E>.<e>.<attempt>``)."""
    return f"{length}.{kind}"


def _parse(stored: Secret) -> int | None:
    """The marker's epoch number (plain decimal), or None for anything else (treated as no marker)."""
    return epoch_mark_value(stored.reveal())


def epoch_mark_value(text: str) -> int | None:
    """An epoch marker's number as the keyring holds it (decimal below 2**63), or None for anything else."""
    if not (0 < len(text) <= _MAX_DIGITS and text.isascii() and text.isdigit()):
        return None
    value = int(text)
    return value if value < 2**63 else None


class EpochMark:
    """Reads (caching the highest value seen) and raises, never lowers, the markers of one vault's epoch keys."""

    __slots__ = ("_keyring", "_kind", "_lock", "_seen", "_service")

    def __init__(self, keyring: KeyringEdge, service: str, kind: str = MARKER) -> None:
        self._keyring, self._service, self._kind = keyring, service, kind
        self._seen: dict[int, int] = {}  # by length: the highest value read or written by this process
        self._lock = threading.Lock()

    def known(self, length: int) -> int | None:
        """The highest value this process has seen, without asking the keyring."""
        with self._lock:
            return self._seen.get(length)

    def read(self, length: int) -> int | None:
        """The marker in the keyring (None when absent or unreadable as a number); raises KeyUnavailable when the
        keyring fails."""
        stored = self._keyring.get(self._service, marker_name(length, self._kind))
        value = None if stored is None else _parse(stored)
        if value is not None:
            self._note(length, value)
        return value

    def covers(self, length: int, epoch: int) -> bool:
        """Whether the marker says ``epoch`` was destroyed; False when the keyring cannot say (the caller then
        reports the key missing, as without a marker)."""
        seen = self.known(length)
        if seen is not None and epoch <= seen:
            return True
        try:
            value = self.read(length)
        except KeyUnavailable:
            return False
        return value is not None and epoch <= value

    def raise_to(self, length: int, value: int) -> bool:
        """Set the marker to ``value`` unless it already holds as much (monotone: with a plain keyring a concurrent
        writer holding less may lower it again, which only delays NotFound for a restored backup, see
        threat_model.md; OpenBao's check-and-set keeps the higher). Best effort: False when the keyring failed
        (nothing is raised; the destruction goes on)."""
        try:
            current = self.read(length)
            if current is not None and current >= value:
                return True
            self._keyring.set(self._service, marker_name(length, self._kind), Secret(str(value)),
                              kept=lambda stored: stored is not None and (_parse(stored) or 0) >= value)
        except KeyUnavailable:
            return False
        self._note(length, value)
        return True

    def _note(self, length: int, value: int) -> None:
        with self._lock:
            self._seen[length] = max(value, self._seen.get(length, value))

    def __repr__(self) -> str:
        return "<EpochMark>"
