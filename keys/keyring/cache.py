"""A small bounded, expiring cache for keys fetched from the keyring (a round trip is slow and may block)."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, NamedTuple, TypeVar

V = TypeVar("V")


class CacheLimits(NamedTuple):
    """How many fetched keys a cache keeps, and for how long after each was fetched."""

    ttl_seconds: float
    max_entries: int


class KeyCache(Generic[V]):
    """At most ``max_entries`` keys, none kept longer than ``ttl_seconds`` after it was fetched (monotonic
    clock); the oldest goes first when full. Expired entries are dropped on every access."""

    def __init__(self, max_entries: int, ttl_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._entries: OrderedDict[Hashable, tuple[float, V]] = OrderedDict()
        self._max_entries = max_entries
        self._ttl = ttl_seconds
        self._clock = clock
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> V | None:
        """The cached value, or None if absent or older than the lifetime."""
        with self._lock:
            self._sweep()
            entry = self._entries.get(key)
            return None if entry is None else entry[1]

    def put(self, key: Hashable, value: V) -> None:
        """Cache ``value``, evicting the oldest entry when full."""
        if self._ttl <= 0 or self._max_entries <= 0:
            return
        with self._lock:
            self._sweep()
            self._entries[key] = (self._clock(), value)
            self._entries.move_to_end(key)
            while len(self._entries) > self._max_entries:
                self._entries.popitem(last=False)

    def _sweep(self) -> None:
        """Drop every entry past its lifetime (caller holds the lock): an idle vault holds no stale keys."""
        now = self._clock()
        while self._entries and now - next(iter(self._entries.values()))[0] >= self._ttl:
            self._entries.popitem(last=False)  # entries are kept in the order they were stored: oldest first

    def invalidate(self, key: Hashable) -> None:
        """Forget one entry (after a rotation or shred in this process)."""
        with self._lock:
            self._entries.pop(key, None)

    def clear(self) -> None:
        """Forget everything (on close)."""
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
