"""This process's counters of a vault (puts, reads, denials, integrity failures, deletes whose count the keyring
did not take) and the integrity guard."""

from __future__ import annotations

import logging
import threading

from vault.errors import IntegrityError
from vault.inputs import parse_row_id

log = logging.getLogger("scratchvault")
NAMES = ("puts", "reads", "denied", "integrity_failures", "deletes_not_counted_in_keyring")


class Counters:
    """Thread-safe counts since the vault was opened; numbers only, never content or ids."""

    def __init__(self) -> None:
        self._counts = dict.fromkeys(NAMES, 0)
        self._lock = threading.Lock()

    def count(self, name: str) -> None:
        """Add one to ``name``."""
        with self._lock:
            self._counts[name] += 1

    def snapshot(self) -> dict[str, int]:
        """A copy of every count."""
        with self._lock:
            return dict(self._counts)

    def integrity_guard(self, id: object = None) -> IntegrityGuard:
        """Count and log every IntegrityError raised inside the block."""
        return IntegrityGuard(self, id)


class IntegrityGuard:
    """Counts and logs an IntegrityError leaving its block, and lets it go on. Never delete: a wrong key or a
    damaged row must not look like an expired one (an agent store once erased a user's history that way)."""

    __slots__ = ("_counters", "_id")

    def __init__(self, counters: Counters, id: object) -> None:
        self._counters, self._id = counters, id

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: object) -> None:
        if isinstance(error, IntegrityError):
            self._counters.count("integrity_failures")
            row = self._id if isinstance(self._id, str) and parse_row_id(self._id) is not None else "-"
            log.warning("scratchvault: integrity failure (row %s); nothing was deleted", row)
