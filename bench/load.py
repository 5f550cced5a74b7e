"""``python -m bench --load [--seconds N] [--locks]``: tail latency of one vault file under contention.

8 processes x 2 threads share one store for a fixed time and each runs a random mix of the operations an agent
runtime makes: puts of 100 B to 1 MiB (log-uniform; some with a 1 s lifetime so gc has work), head reads of its
own rows, deletes, ``extend_turn`` of its current turn (10 puts a turn) and ``gc``. Prints p50/p99/max per
operation and ops/s, puts of <= 64 KiB apart, and every error by type (anything but a VaultError is a bug).
``--locks`` also times, per operation, the wait for the SQLite write transaction and how long it was held. The
store is a SQLite file here, or a PostgreSQL schema (bench/pg_load.py runs both side by side).

Keys: the parent creates the vault, every owner's keyset and the key of every expiry epoch the run's rows can
fall in, in an in-memory keyring (as the main benchmark does), and hands a copy of its secrets to each child;
children never create keys, so the copies never diverge (a key one child made would be missing from the others'
copies, as from a wrong keyring).
"""

from __future__ import annotations

import faulthandler
import math
import multiprocessing
import os
import queue
import random
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from bench import locktrace
from bench.cpu import CpuWindow
from bench.load_report import LoadResult, render
from keys.epochs.schedule import DEFAULT_EPOCH_SECONDS
from keys.testing import MemoryKeyring
from vault import Principal, Vault, VaultError

KIB, MIB = 1024, 1024 * 1024
SMALL = 64 * KIB
DEFAULT_OWNERS = 4
MIX = {"put": 40, "read": 35, "delete": 10, "extend_turn": 10, "gc": 5}  # weights, per cent
PUTS_PER_TURN = 10
SHORT_TTL, LONG_TTL = 1, 3600  # seconds; a quarter of puts live SHORT_TTL, what gc finds to collect
SHORT_TTL_SHARE = 0.25
STUCK_AFTER = 120  # seconds past its deadline a child is taken for stuck (an operation takes far less)
START_MARGIN = 600  # seconds between preparing the keys and the children's last put: spawning, waiting, slow runs
TEXT = "".join(f"{i:06d} load line, observation words in it\n" for i in range(MIB // 40 + 1))[:MIB]


def owners(count: int) -> list[Principal]:
    """The run's owners; thread ``n`` of the run writes as owner ``n % count``."""
    return [Principal(f"load-{n}") for n in range(count)]


class Worker:
    """One thread's loop: its owner, its own turns and rows; latencies (ms) by operation name. Its random numbers
    shape a workload, they guard nothing (hence the plain PRNG)."""

    def __init__(self, vault: Vault, name: str, seed: int, owner: Principal) -> None:
        self.vault, self.name, self.owner = vault, name, owner
        self.rng = random.Random(seed)  # noqa: S311  # nosec B311
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
        rep = self.vault.put(self.owner, self.turn, self.puts, "load", TEXT[:size],
                             ttl_seconds=SHORT_TTL if short else LONG_TTL)
        self.puts += 1
        if not short:
            self.rows.append(rep.id)
        return "put <= 64 KiB" if size <= SMALL else "put > 64 KiB"

    def do_read(self) -> None:
        self.vault.read(self.owner, self.rng.choice(self.rows), "head", n=2000)

    def do_delete(self) -> None:
        self.vault.delete(self.owner, self.rows.pop(self.rng.randrange(len(self.rows))))

    def do_extend_turn(self) -> None:
        self.vault.extend_turn(self.owner, self.turn, LONG_TTL)

    def do_gc(self) -> None:
        self.vault.gc()


@dataclass(frozen=True)
class LoadPlan:
    """What a load run is: how many processes, threads in each and owners among them, for how long, and whether
    the SQLite write lock is traced."""

    seconds: float
    processes: int = 8
    threads: int = 2
    owners: int = DEFAULT_OWNERS
    trace: bool = False


@dataclass(frozen=True)
class ChildPlan:
    """What every child process runs: the store's location, a copy of the keyring's secrets, the load."""

    location: str
    secrets: dict
    load: LoadPlan


def child(index: int, plan: ChildPlan, start: multiprocessing.synchronize.Barrier,
          results: multiprocessing.Queue) -> None:
    """One process: open the vault on a copy of the keys, wait for the others, run its threads' workers."""
    load = plan.load
    keyring = MemoryKeyring()
    keyring.secrets.update(plan.secrets)
    if load.trace:
        locktrace.install()
    run_owners = owners(load.owners)
    with Vault.open(plan.location, keyring_backend=keyring) as vault:
        seeds = [index * load.threads + n for n in range(load.threads)]
        workers = [Worker(vault, f"p{index}t{n}", seed, run_owners[seed % load.owners])
                   for n, seed in enumerate(seeds)]
        start.wait()
        # a process still running well after its deadline is stuck: every thread's stack to stderr, to say where
        faulthandler.dump_traceback_later(load.seconds + STUCK_AFTER, exit=True)
        cpu_started = time.process_time()
        deadline = time.monotonic() + load.seconds
        running = [threading.Thread(target=w.run, args=(deadline,)) for w in workers]
        for thread in running:
            thread.start()
        for thread in running:
            thread.join()
        cpu = time.process_time() - cpu_started
    faulthandler.cancel_dump_traceback_later()
    results.put(LoadResult.gathered([(w.samples, w.errors) for w in workers],
                                    locktrace.collected() if load.trace else {}, cpu))


def prepare(location: str, load: LoadPlan) -> dict:
    """Make the vault, every owner's keyset and every expiry epoch's key the run can need (a put of 1 s or an
    hour, an ``extend_turn`` by an hour, any time before the run ends); returns the keyring's secrets."""
    keyring = MemoryKeyring()
    with Vault.open(location, keyring_backend=keyring) as vault:
        for owner in owners(load.owners):
            vault.delete(owner, vault.put(owner, "setup", 0, "load", "x").id)
        reach = math.ceil(load.seconds) + START_MARGIN + LONG_TTL
        # less than an epoch apart, so no epoch between two puts' expiries is missed whatever the clock reads
        lifetimes = [*range(SHORT_TTL, reach, DEFAULT_EPOCH_SECONDS // 2), reach]
        first = owners(1)[0]
        for ttl in lifetimes:
            vault.delete(first, vault.put(first, "setup", 1, "load", "x", ttl_seconds=ttl).id)
    return dict(keyring.secrets)


def run(location: str, load: LoadPlan, server_pid: int | None = None) -> LoadResult:
    """The load run on the vault at ``location`` (made here; a SQLite path, or a PostgreSQL URL whose schema
    holds no vault yet); with ``server_pid``, the CPU of that local server's processes is measured too."""
    context = multiprocessing.get_context("spawn")  # no fork of a process holding store handles
    secrets = prepare(location, load)
    start, results = context.Barrier(load.processes + 1), context.Queue()
    plan = ChildPlan(location, secrets, load)
    children = [context.Process(target=child, args=(n, plan, start, results)) for n in range(load.processes)]
    for process in children:
        process.start()
    window = CpuWindow(server_pid)
    start.wait(timeout=120)
    window.start()
    began = time.monotonic()
    try:
        gathered = [results.get(timeout=load.seconds + 2 * STUCK_AFTER) for _ in children]
    except queue.Empty:
        for process in children:
            process.terminate()
        raise RuntimeError("a load process did not finish: it printed its threads' stacks on stderr") from None
    elapsed = time.monotonic() - began
    window.stop()
    for process in children:
        process.join()
    result = LoadResult.merged(gathered, elapsed)
    result.server_cpu, result.machine_cpu = window.server, window.machine
    return result


def run_sqlite(load: LoadPlan) -> LoadResult:
    """The load run on a new SQLite file in a private temporary directory, removed after."""
    with tempfile.TemporaryDirectory(prefix="scratchvault-load-") as scratch:
        os.chmod(scratch, 0o700)
        return run(str(Path(scratch) / "load.db"), load)


def main(seconds: float, trace: bool = False, postgres: str | None = None) -> int:
    """Run the load on SQLite and print its table (with ``postgres``, a URL: on both stores, bench/pg_load.py);
    exit 1 only if an error escaped that is not a VaultError."""
    if postgres:
        from bench import pg_load  # psycopg: the optional extra, imported only with --postgres

        return pg_load.main(postgres, seconds, trace)
    load = LoadPlan(seconds, trace=trace)
    print(f"load: {load.processes} processes x {load.threads} threads, {load.owners} owners, one file, "
          f"{seconds:g} s, mix {MIX}", file=sys.stderr)
    result = run_sqlite(load)
    print(render(result))
    print(f"\nload run, {result.elapsed:.0f} s, {os.cpu_count()} cores")
    return 1 if result.escaped() else 0
