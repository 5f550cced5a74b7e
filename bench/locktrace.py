"""Where a write's time goes under load (``python -m bench --load --locks``): the wait to begin each write
transaction, how long it is then held (to the end of its commit), and each WAL checkpoint (``scrub``: done, or
left pending), by the operation that ran it. A benchmark-only wrapper around the SQLite store's methods; the
vault never loads it."""

from __future__ import annotations

import statistics
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from vault.storage.sqlite.store import SqliteStore
from vault.storage.sqlite.writes import SqliteWriteTx

_local = threading.local()
_timings: dict[str, list[float]] = defaultdict(list)
_lock = threading.Lock()


def current_op(name: str) -> None:
    """Name the operation this thread runs next (its timings are filed under it)."""
    _local.op = name


def _record(kind: str, ms: float) -> None:
    with _lock:
        _timings[f"{getattr(_local, 'op', '-')}\0{kind}"].append(ms)


def install() -> None:
    """Wrap the write transaction's enter and exit, and scrub, with timers (in this process only)."""
    enter, leave, scrub = SqliteWriteTx.__enter__, SqliteWriteTx.__exit__, SqliteStore.scrub

    def timed_enter(self: SqliteWriteTx) -> SqliteWriteTx:
        started = time.perf_counter()
        result = enter(self)
        _local.held = time.perf_counter()
        _record("wait", (_local.held - started) * 1000)
        return result

    def timed_exit(self: SqliteWriteTx, *exc_info: Any) -> None:
        try:
            leave(self, *exc_info)
        finally:
            _record("hold", (time.perf_counter() - _local.held) * 1000)

    SqliteWriteTx.__enter__ = timed_enter  # type: ignore[method-assign]
    SqliteWriteTx.__exit__ = timed_exit  # type: ignore[method-assign]
    SqliteStore.scrub = _timed_scrub(scrub)  # type: ignore[method-assign, assignment]


def _timed_scrub(scrub: Callable[[SqliteStore], None]) -> Callable[[SqliteStore], None]:
    """Scrubs that finished, and those left pending (a reader or writer kept the checkpoint from finishing)."""
    def wrapper(store: SqliteStore) -> None:
        started = time.perf_counter()
        try:
            scrub(store)
        finally:
            _record("scrub left pending" if store._scrub_pending else "scrub", (time.perf_counter() - started) * 1000)
    return wrapper


def collected() -> dict[str, list[float]]:
    """This process's timings, keyed ``op\\0kind``."""
    with _lock:
        return {key: list(values) for key, values in _timings.items()}


def render(timings: dict[str, list[float]]) -> str:
    """Per operation: write transactions (count), wait and hold p50/p99/max, checkpoints (scrub) likewise."""
    lines = ["| operation | what | count | p50 ms | p99 ms | max ms | total s |", "|---|---|---:|---:|---:|---:|---:|"]
    for key in sorted(timings):
        op, kind = key.split("\0")
        values = sorted(timings[key])
        p99 = values[min(len(values) - 1, int(0.99 * len(values)))]
        lines.append(f"| {op} | {kind} | {len(values):,} | {statistics.median(values):.1f} | {p99:.1f} | "
                     f"{values[-1]:.1f} | {sum(values) / 1000:.1f} |")
    return "\n".join(lines)
