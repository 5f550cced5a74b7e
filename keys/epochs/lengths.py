"""Every expiry epoch length a vault made keys for, and how far, kept in the keyring (threat_model.md, "Expiry
epochs"): an operator who changes ``epoch_seconds`` leaves keys of the old length behind, and gc must still find
them once their epochs end, even after a writer of the database deleted their records.

Two kinds of entry: service ``scratchvault/<vault_id hex>/epoch-lengths``, user ``lengths``, the lengths as
comma-separated decimals, each added before the first key of its length this process makes (read back; a length
lost to two processes writing at once is added again by the next process that uses it); and per length, in the
epoch keys' service, the ``<E>.made-through`` marker, raised before any key of a higher epoch is written, which
bounds how far gc probes a length no process uses any more.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from keys.epochs.marks import EpochMark
from keys.epochs.schedule import MAX_EPOCH_SECONDS, MIN_EPOCH_SECONDS
from keys.errors import KeyUnavailable
from keys.keyring.edge import KeyringEdge
from keys.keyring.secret import Secret

MADE = "made-through"
_LIST = "lengths"
_UNRECORDED = ("the OS keyring did not keep the record of an expiry epoch key about to be made; nothing was written, "
               "retry")


class EpochLengths:
    """Records the lengths and the highest epoch a vault makes keys for, before each key is written."""

    __slots__ = ("_keyring", "_list_service", "_listed", "_lock", "_made", "_recorded")

    def __init__(self, keyring: KeyringEdge, service: str) -> None:
        self._keyring, self._list_service = keyring, service.rsplit("/", 1)[0] + "/epoch-lengths"
        self._made = EpochMark(keyring, service, MADE)
        self._recorded: set[int] = set()  # lengths this process has seen in the list
        self._listed: list[int] | None = None  # the list as this process first read it (gc's lengths)
        self._lock = threading.Lock()

    def before_key(self, length: int, epoch: int) -> None:
        """Record that a key of ``epoch`` of ``length`` is about to be written: KeyUnavailable when the keyring does
        not keep it (the key is then not written)."""
        if length not in self._recorded:
            self._record(length)
        known = self._made.known(length)
        if (known is None or known < epoch) and not self._made.raise_to(length, epoch):
            raise KeyUnavailable(_UNRECORDED)

    def others(self, length: int) -> list[tuple[int, int | None]]:
        """The other lengths the list names, each with the highest epoch a key of it was made for (None: its marker
        is missing or unreadable, so its probe is not bounded). Read from the keyring once per process."""
        with self._lock:
            if self._listed is None:
                self._listed = self._read()
            listed = list(self._listed)
        found = []
        for other in listed:
            if other != length:
                known = self._made.known(other)
                found.append((other, known if known is not None else self._made.read(other)))
        return found

    def _record(self, length: int) -> None:
        for _ in range(3):
            listed = self._read()
            if length in listed:
                with self._lock:
                    self._recorded.add(length)
                return
            wanted = {*listed, length}
            text = ",".join(str(value) for value in sorted(wanted))
            self._keyring.set(self._list_service, _LIST, Secret(text), kept=_holding(wanted))
        raise KeyUnavailable(_UNRECORDED)

    def _read(self) -> list[int]:
        """The lengths the keyring's list names (values that are not lengths are left out)."""
        return _lengths(self._keyring.get(self._list_service, _LIST))

    def __repr__(self) -> str:
        return "<EpochLengths>"


def _holding(wanted: set[int]) -> Callable[[Secret | None], bool]:
    """Whether a list read back holds every length written (another process's lengths may have joined them)."""
    return lambda stored: wanted <= set(_lengths(stored))


def _lengths(stored: Secret | None) -> list[int]:
    """The lengths a stored list names: anything but a length a vault can have (check_length's bounds) is left out,
    so that nothing planted in the keyring (a zero above all, which the probe would divide by) reaches gc."""
    parts = [] if stored is None else stored.reveal().split(",")
    numbers = {int(part) for part in parts if part.isascii() and part.isdigit() and 0 < len(part) <= 6}
    return sorted(number for number in numbers if MIN_EPOCH_SECONDS <= number <= MAX_EPOCH_SECONDS)
