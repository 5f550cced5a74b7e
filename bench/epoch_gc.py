"""What gc pays per ended expiry epoch: the keyring calls and the time of destroying epoch keys.

``bash bench/epoch_keyring.sh --gc [...]`` runs this module inside a private D-Bus session with a fresh GNOME
Keyring (as scripts/run starts it); ``python -m bench.epoch_gc`` alone uses whatever keyring the session has. A
Vault (SQLite in a temporary directory) on that keyring, with a fake clock, holds one row in each of the next
``--present`` epochs (so about that many epoch keys sit in the keyring). For each N of ``--ended`` the clock is
moved past the end of N more epochs plus the skew allowance and ``vault.gc()`` is timed; before it, the same gc
with no epoch ended. The backend is wrapped to count (and time) get, set and delete; the difference over N is the
cost per ended epoch. Between measurements the rows are topped up to ``--present`` epochs ahead of the clock.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import keyring
from keyring.backend import KeyringBackend

from keys.keyring.edge import resolve_backend
from vault import Principal, Vault

T = TypeVar("T")

OWNER = Principal("bench-epoch-gc")
DEFAULT_ENDED = (1, 3, 24)


class CountingKeyring(KeyringBackend):
    """Passes every call to the real backend; counts the calls and the seconds spent in them, per kind."""

    def __init__(self, inner: KeyringBackend) -> None:
        super().__init__()
        self._inner = inner
        self.calls: Counter[str] = Counter()
        self.seconds: defaultdict[str, float] = defaultdict(float)

    def _timed(self, kind: str, operation: Callable[..., T], *args: str) -> T:
        started = time.perf_counter()
        try:
            return operation(*args)
        finally:
            self.calls[kind] += 1
            self.seconds[kind] += time.perf_counter() - started

    def get_password(self, service: str, username: str) -> str | None:
        """The real backend's answer, counted."""
        return self._timed("get", self._inner.get_password, service, username)

    def set_password(self, service: str, username: str, password: str) -> None:
        """The real backend's write, counted."""
        self._timed("set", self._inner.set_password, service, username, password)

    def delete_password(self, service: str, username: str) -> None:
        """The real backend's delete, counted."""
        self._timed("delete", self._inner.delete_password, service, username)

    def snapshot(self) -> tuple[Counter[str], float]:
        """The counts so far and the total seconds spent in the backend."""
        return Counter(self.calls), sum(self.seconds.values())


class Clock:
    """A settable clock: the vault's notion of now."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class EpochGcBench:
    """One vault, rows in the next ``present`` epochs, and gc timed with and without epochs ending."""

    def __init__(self, directory: Path, present: int, epoch_seconds: int, skew: int) -> None:
        self.backend = CountingKeyring(resolve_backend(keyring.get_keyring()))
        self.length, self.skew, self.present = epoch_seconds, skew, present
        start_epoch = int(time.time()) // epoch_seconds + 1
        self.clock = Clock(float(start_epoch * epoch_seconds + skew + 1))
        self.vault = Vault.open(directory / "vault.db", keyring_backend=self.backend, clock=self.clock,
                                epoch_seconds=epoch_seconds, epoch_skew_seconds=skew)
        self.filled_through = start_epoch - 1  # the highest epoch holding one of our rows
        self.step = 0

    def current_epoch(self) -> int:
        return int(self.clock.now) // self.length

    def top_up(self) -> tuple[int, float]:
        """Put one row into each epoch from the clock's to ``present - 1`` ahead of it (every epoch the next gc
        may end holds a key); returns (rows put, seconds taken)."""
        started, put = time.perf_counter(), 0
        while self.filled_through < self.current_epoch() + self.present - 1:
            self.filled_through += 1
            expires = max(self.filled_through * self.length + 1, self.clock.now + 60)  # early in the epoch
            ttl = expires - self.clock.now
            self.step += 1
            self.vault.put(OWNER, "epoch-gc", self.step, "bench", "x" * 64, ttl_seconds=ttl)
            put += 1
        return put, time.perf_counter() - started

    def timed_gc(self) -> tuple[float, Counter[str], float, int]:
        """One gc: (wall ms, keyring calls by kind, ms inside the keyring, rows removed)."""
        calls_before, spent_before = self.backend.snapshot()
        started = time.perf_counter()
        removed = self.vault.gc()
        wall = (time.perf_counter() - started) * 1000
        calls_after, spent_after = self.backend.snapshot()
        return wall, calls_after - calls_before, (spent_after - spent_before) * 1000, removed

    def end_epochs(self, count: int) -> None:
        """Move the clock so that ``count`` more epochs are past their end plus the skew allowance."""
        self.clock.now = float((self.current_epoch() + count) * self.length + self.skew + 1)


def _calls(counts: Counter[str]) -> str:
    return "/".join(str(counts[kind]) for kind in ("get", "set", "delete"))


def measure(bench: EpochGcBench, ended: int, controls: int) -> dict[str, float]:
    """Control gcs (nothing ended), then one gc after ``ended`` epochs ended; the extra cost per ended epoch."""
    control = [bench.timed_gc() for _ in range(controls)]
    base_ms = statistics.median(c[0] for c in control)
    base_calls = control[-1][1]
    base_key_ms = statistics.median(c[2] for c in control)
    bench.end_epochs(ended)
    wall, calls, key_ms, removed = bench.timed_gc()
    extra = calls - base_calls
    print(f"  ended {ended:>3}: gc {wall:8.1f} ms (keyring {key_ms:7.1f} ms, {removed} rows), control "
          f"{base_ms:6.1f} ms (keyring {base_key_ms:5.1f} ms); calls get/set/delete {_calls(calls)} vs "
          f"{_calls(base_calls)}; per ended epoch {(wall - base_ms) / ended:6.1f} ms, "
          f"{sum(extra.values()) / ended:.2f} calls ({_calls(extra)} in all)", flush=True)
    return {"ended": ended, "ms_per_epoch": (wall - base_ms) / ended,
            "keyring_ms_per_epoch": (key_ms - base_key_ms) / ended, "calls_per_epoch": sum(extra.values()) / ended}


def run(present: int, ended: list[int], rounds: int, controls: int, epoch_seconds: int, skew: int) -> list[dict]:
    """Fill, then measure every N of ``ended`` ``rounds`` times, topping up between measurements."""
    with tempfile.TemporaryDirectory(prefix="epoch-gc-") as directory:
        bench = EpochGcBench(Path(directory), present, epoch_seconds, skew)
        try:
            put, seconds = bench.top_up()
            print(f"present ~{present} epoch keys: filled {put} epochs in {seconds:.0f} s "
                  f"({seconds * 1000 / max(1, put):.0f} ms per new epoch key)", flush=True)
            results = []
            for _ in range(rounds):
                for count in ended:
                    results.append(measure(bench, count, controls))
                    bench.top_up()
            return results
        finally:
            bench.vault.close()


def summarize(results: list[dict]) -> None:
    """Medians per N over the rounds, then the marginal cost of one more ended epoch (between the smallest and the
    largest N: what a gc pays once, the marker's read and write, drops out)."""
    medians: dict[int, dict[str, float]] = {}
    for count in sorted({r["ended"] for r in results}):
        rows = [r for r in results if r["ended"] == count]
        medians[count] = {key: statistics.median(r[key] * count for r in rows)
                          for key in ("ms_per_epoch", "keyring_ms_per_epoch", "calls_per_epoch")}
        print(f"  N={count:>3}: median over {len(rows)} rounds: gc extra {medians[count]['ms_per_epoch']:.1f} ms "
              f"(keyring {medians[count]['keyring_ms_per_epoch']:.1f} ms), "
              f"{medians[count]['calls_per_epoch']:.0f} keyring calls", flush=True)
    low, high = min(medians), max(medians)
    if high > low:
        slope = {key: (medians[high][key] - medians[low][key]) / (high - low) for key in medians[low]}
        print(f"  marginal, N={low}..{high}: {slope['ms_per_epoch']:.1f} ms per ended epoch (keyring "
              f"{slope['keyring_ms_per_epoch']:.1f} ms), {slope['calls_per_epoch']:.2f} keyring calls per ended epoch; "
              f"fixed per gc {medians[low]['calls_per_epoch'] - low * slope['calls_per_epoch']:.0f} calls", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--present", type=int, nargs="+", default=[30, 720],
                        help="epoch keys present (rows in that many epochs ahead of the clock); max 720 (30 days)")
    parser.add_argument("--ended", type=int, nargs="+", default=list(DEFAULT_ENDED))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--controls", type=int, default=3, help="gcs with nothing ended before each measurement")
    parser.add_argument("--epoch-seconds", type=int, default=3600)
    parser.add_argument("--skew", type=int, default=300)
    args = parser.parse_args(argv)
    print(f"backend {type(resolve_backend(keyring.get_keyring())).__name__}; epoch {args.epoch_seconds} s, "
          f"skew {args.skew} s; ended {args.ended}, {args.rounds} rounds", flush=True)
    for present in args.present:
        summarize(run(present, args.ended, args.rounds, args.controls, args.epoch_seconds, args.skew))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
