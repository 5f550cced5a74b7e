"""``python -m bench --load [--seconds N] [--locks]``: tail latency of one vault file under contention.

8 processes x 2 threads share one SQLite file for a fixed time and each runs a random mix of the operations an
agent runtime makes: puts of 100 B to 1 MiB (log-uniform; some with a 1 s lifetime so gc has work), head reads of
its own rows, deletes, ``extend_turn`` of its current turn (10 puts a turn) and ``gc``. Prints p50/p99/max per
operation and ops/s, puts of <= 64 KiB apart, and every error by type (anything but a VaultError is a bug).
``--locks`` also times, per operation, the wait for the write transaction and how long it was held.

Keys: the parent creates the vault and every owner's keyset in an in-memory keyring (as the main benchmark does)
and hands a copy of its secrets to each child; children never create keys, so the copies never diverge.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from bench import locktrace
from keys.testing import MemoryKeyring
from vault import Principal, Vault, VaultError

KIB, MIB = 1024, 1024 * 1024
SMALL = 64 * KIB
OWNERS = [Principal(f"load-{n}") for n in range(4)]
MIX = {"put": 40, "read": 35, "delete": 10, "extend_turn": 10, "gc": 5}  # weights, per cent
PUTS_PER_TURN = 10
SHORT_TTL_SHARE = 0.25  # of puts, living 1 s: what gc finds to collect
TEXT = "".join(f"{i:06d} load line, observation words in it\n" for i in range(MIB // 40 + 1))[:MIB]


class Worker:
    """One thread's loop: its own owner, turns and rows; latencies (ms) by operation name. Its random numbers
    shape a workload, they guard nothing (hence the plain PRNG)."""

    def __init__(self, vault: Vault, name: str, seed: int) -> None:
        self.vault, self.name = vault, name
        self.rng = random.Random(seed)  # noqa: S311  # nosec B311
        self.owner = OWNERS[seed % len(OWNERS)]
        self.rows: list[str] = []
        self.puts = 0
        self.samples: dict[str, list[float]] = defaultdict(list)
        self.errors: Counter[str] = Counter()

    @property
    def turn(self) -> str:
        return f"{self.name}-turn-{self.puts // PUTS_PER_TURN}"

    def run(self, deadline: float) -> None:
        ops, weights = list(MIX), list(MIX.values())
        while time.monotonic() < deadline:
            op = self.rng.choices(ops, weights)[0]
            if op in ("read", "delete") and not self.rows:
                op = "put"
            self.timed(op)

    def timed(self, op: str) -> None:
        locktrace.current_op(op)
        started = time.perf_counter()
        try:
            name = getattr(self, "do_" + op)()
        except VaultError as error:
            self.errors[type(error).__name__] += 1
            return
        except Exception as error:  # a bug: counted by type, reported; the run goes on
            self.errors["NOT A VaultError: " + type(error).__name__] += 1
            return
        self.samples[name or op].append((time.perf_counter() - started) * 1000)

    def do_put(self) -> str:
        size = int(math.exp(self.rng.uniform(math.log(100), math.log(MIB))))
        short = self.rng.random() < SHORT_TTL_SHARE
        rep = self.vault.put(self.owner, self.turn, self.puts, "load", TEXT[:size], ttl_seconds=1 if short else 3600)
        self.puts += 1
        if not short:
            self.rows.append(rep.id)
        return "put <= 64 KiB" if size <= SMALL else "put > 64 KiB"

    def do_read(self) -> None:
        self.vault.read(self.owner, self.rng.choice(self.rows), "head", n=2000)

    def do_delete(self) -> None:
        self.vault.delete(self.owner, self.rows.pop(self.rng.randrange(len(self.rows))))

    def do_extend_turn(self) -> None:
        self.vault.extend_turn(self.owner, self.turn, 3600)

    def do_gc(self) -> None:
        self.vault.gc()


@dataclass(frozen=True)
class ChildPlan:
    """What every child process runs: the database, a copy of the keyring's secrets, its threads, for how long,
    and whether it traces its locks."""

    db: str
    secrets: dict
    threads: int
    seconds: float
    trace: bool


def child(index: int, plan: ChildPlan, start: multiprocessing.synchronize.Barrier,
          results: multiprocessing.Queue) -> None:
    """One process: open the vault on a copy of the keys, wait for the others, run ``plan.threads`` workers."""
    threads, seconds, trace = plan.threads, plan.seconds, plan.trace
    keyring = MemoryKeyring()
    keyring.secrets.update(plan.secrets)
    if trace:
        locktrace.install()
    with Vault.open(plan.db, keyring_backend=keyring) as vault:
        workers = [Worker(vault, f"p{index}t{n}", index * threads + n) for n in range(threads)]
        start.wait()
        deadline = time.monotonic() + seconds
        running = [threading.Thread(target=w.run, args=(deadline,)) for w in workers]
        for thread in running:
            thread.start()
        for thread in running:
            thread.join()
    samples: dict[str, list[float]] = defaultdict(list)
    errors: Counter[str] = Counter()
    for worker in workers:
        for op, values in worker.samples.items():
            samples[op] += values
        errors.update(worker.errors)
    results.put((dict(samples), dict(errors), locktrace.collected() if trace else {}))


def prepare(db: Path) -> dict:
    """Make the vault and every owner's keyset; returns the keyring's secrets for the children."""
    keyring = MemoryKeyring()
    with Vault.open(db, keyring_backend=keyring) as vault:
        for owner in OWNERS:
            vault.delete(owner, vault.put(owner, "setup", 0, "load", "x").id)
    return dict(keyring.secrets)


def run(seconds: float, processes: int, threads: int, trace: bool) -> tuple[dict, dict, dict, float]:
    """The load run; returns samples by op, errors by type, lock timings by op, and the measured duration."""
    context = multiprocessing.get_context("spawn")  # no fork of a process holding SQLite handles
    with tempfile.TemporaryDirectory(prefix="scratchvault-load-") as scratch:
        os.chmod(scratch, 0o700)
        db = Path(scratch) / "load.db"
        secrets = prepare(db)
        start, results = context.Barrier(processes + 1), context.Queue()
        plan = ChildPlan(str(db), secrets, threads, seconds, trace)
        children = [context.Process(target=child, args=(n, plan, start, results)) for n in range(processes)]
        for process in children:
            process.start()
        start.wait(timeout=120)
        began = time.monotonic()
        gathered = [results.get(timeout=seconds + 600) for _ in children]
        elapsed = time.monotonic() - began
        for process in children:
            process.join()
    samples: dict[str, list[float]] = defaultdict(list)
    errors: Counter[str] = Counter()
    locks: dict[str, list[float]] = defaultdict(list)
    for child_samples, child_errors, child_locks in gathered:
        for op, values in child_samples.items():
            samples[op] += values
        errors.update(child_errors)
        for key, values in child_locks.items():
            locks[key] += values
    return samples, dict(errors), locks, elapsed


def percentile(values: list[float], share: float) -> float:
    """The ``share`` quantile (nearest rank) of ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(share * len(ordered)) - 1))]


def render(samples: dict, errors: dict, locks: dict, elapsed: float) -> str:
    """The result table as Markdown, then the small-put ratio, errors and (with ``--locks``) lock timings."""
    order = ["put <= 64 KiB", "put > 64 KiB", "read", "delete", "extend_turn", "gc"]
    lines = ["| operation | count | p50 ms | p99 ms | max ms | mean ms | ops/s |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for op in [*order, *sorted(set(samples) - set(order))]:
        values = samples.get(op)
        if values:
            lines.append(f"| {op} | {len(values):,} | {statistics.median(values):.1f} | "
                         f"{percentile(values, 0.99):.1f} | {max(values):.1f} | {statistics.fmean(values):.1f} | "
                         f"{len(values) / elapsed:.1f} |")
    total = sum(len(v) for v in samples.values())
    lines.append(f"| all | {total:,} | | | | | {total / elapsed:.1f} |")
    small = samples.get("put <= 64 KiB")
    if small:
        ratio = percentile(small, 0.99) / statistics.median(small)
        lines.append(f"\nput <= 64 KiB: p99 / p50 = {ratio:.1f} (target <= 10)")
    lines.append("errors: " + (", ".join(f"{k} {v}" for k, v in sorted(errors.items())) or "none"))
    if locks:
        lines += ["", locktrace.render(locks)]
    return "\n".join(lines)


def main(seconds: float, processes: int = 8, threads: int = 2, trace: bool = False) -> int:
    """Run the load and print its table; exit 1 only if an error escaped that is not a VaultError."""
    print(f"load: {processes} processes x {threads} threads, one file, {seconds:g} s, mix {MIX}", file=sys.stderr)
    samples, errors, locks, elapsed = run(seconds, processes, threads, trace)
    print(render(samples, errors, locks, elapsed))
    print(f"\nload run, {elapsed:.0f} s, {os.cpu_count()} cores")
    return 1 if any(kind.startswith("NOT") for kind in errors) else 0
