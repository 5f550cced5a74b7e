"""The benchmark: each case runs the vault and the plaintext baseline on the same data, in this process.

Prints medians and the ratio vault / baseline for every case of the README's Performance table, peak memory for
the large cases, and, separately, what the real OS keyring costs. Uses the in-memory keyring for the ratios so
that D-Bus latency does not hide the vault's own cost. ``--postgres URL``: the same cases over PostgreSQL
(bench/pg_run.py).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench import load, memory, report
from bench.baseline import PlainStore
from bench.report import Memory, Row
from keys.testing import MemoryKeyring
from vault import KeyUnavailable, Principal, Vault

KIB, MIB = 1024, 1024 * 1024
SLICE = 2000
OWNER = Principal("bench-user")

if TYPE_CHECKING:
    from bench.pg_baseline import PlainPgStore  # psycopg: the optional extra, imported only with --postgres


def median_ms(operation: Callable[[], object], runs: int, settle: bool = False) -> float:
    """Median wall time of ``runs`` calls, in milliseconds (see ``timed_ms`` for ``settle``)."""
    return statistics.median([timed_ms(operation, settle) for _ in range(runs)])


def timed_ms(operation: Callable[[], object], settle: bool = False) -> float:
    """Wall time of one call, in milliseconds. With ``settle`` (writes), ``os.sync()`` first, untimed, so that a
    call is not charged for writeback still pending from the one before, its own store's or the other's. Reads
    are not settled each time: a sync just before a 0.1 ms read makes it pay for a cold CPU instead."""
    if settle:
        os.sync()
    started = time.perf_counter()
    operation()
    return (time.perf_counter() - started) * 1000


def paired_medians_ms(first: Callable[[], object], second: Callable[[], object], runs: int,
                      settle: bool = False) -> tuple[float, float]:
    """Medians of ``runs`` calls of each. Writes (``settle``) are interleaved (first, second, first, ...), each
    after an ``os.sync()``, so both meet the same disk state. Reads run all of one, then all of the other, after
    one sync: interleaved, each fast read would follow the other store's whole-row read and pay for its evicted
    caches."""
    os.sync()  # whatever an earlier case left to write back is written before this one starts
    if not settle:
        return median_ms(first, runs), median_ms(second, runs)
    samples: tuple[list[float], list[float]] = ([], [])
    for _ in range(runs):
        samples[0].append(timed_ms(first, settle=True))
        samples[1].append(timed_ms(second, settle=True))
    return statistics.median(samples[0]), statistics.median(samples[1])


def text_of(size: int) -> str:
    """ASCII text of exactly ``size`` characters (and bytes), lines of varying content."""
    line = "".join(f"{i:06d} observation line with some words in it\n" for i in range(2000))
    return (line * (size // len(line) + 1))[:size]


class Bench:
    """The vault and its plaintext baseline side by side, on the same data."""

    def __init__(self, vault: Vault, plain: PlainStore | PlainPgStore, quick: bool) -> None:
        self.quick = quick
        self.runs = 3 if quick else 7
        self.vault, self.plain = vault, plain
        self.rows: list[Row] = []
        self.memory: list[Memory] = []

    @classmethod
    def sqlite(cls, directory: Path, quick: bool) -> Bench:
        """The vault's SQLite file and the plaintext SQLite baseline, in ``directory``."""
        vault = Vault.open(directory / "vault.db", keyring_backend=MemoryKeyring(), max_read=SLICE)
        return cls(vault, PlainStore(directory / "plain.db"), quick)

    def run(self, started: float, more: tuple[Callable[[], object], ...] = ()) -> Bench:
        """Every case, in order (``more`` after the listing), saying on stderr when each stage is done; the stores
        are closed after."""
        stages = (self.puts, self.slices, self.full_reads, self.finds, self.listing, *more, self.gc, self.rewrap,
                  self.peak_memory)
        try:
            for stage in stages:
                stage()
                print(f"  {stage.__name__} done ({time.time() - started:.0f} s)", file=sys.stderr)
        finally:
            self.vault.close()
            self.plain.close()
        return self

    def add(self, case: str, vault_op: Callable[[], object], plain_op: Callable[[], object] | None,
            target: float | None, runs: int | None = None, settle: bool = False) -> Row:
        runs = runs or self.runs
        if plain_op is None:
            row = Row(case, None, median_ms(vault_op, runs, settle), target)
        else:
            plain_ms, vault_ms = paired_medians_ms(plain_op, vault_op, runs, settle)
            row = Row(case, plain_ms, vault_ms, target)
        self.rows.append(row)
        return row

    def puts(self) -> None:
        sizes = [(4 * KIB, 1.5), (1 * MIB, 1.15), ((16 if self.quick else 64) * MIB, 1.15)]
        for size, target in sizes:
            text = text_of(size)
            # a 4 KiB put takes a fraction of a millisecond and swings with the machine's state (15 runs gave
            # medians 10% apart run to run): many cheap runs; fewer as sizes grow
            runs = 101 if size < MIB else (3 * self.runs if size == MIB else 3)
            self.add(f"put {_size(size)} text", partial(self.vault.put, OWNER, "puts", 0, "x", text),
                     partial(self.plain.put, "puts", 0, "x", text), target, runs=runs, settle=True)
        blob = os.urandom(16 * MIB)
        self.add("put 16 MiB binary", lambda: self.vault.put(OWNER, "puts", 0, "x", blob),
                 lambda: self.plain.put("puts", 0, "x", blob), None, runs=3, settle=True)

    def slices(self) -> None:
        sizes = [64 * KIB, 1 * MIB, (16 if self.quick else 64) * MIB]
        per_size: dict[int, dict[str, float]] = {}
        for size in sizes:
            per_size[size] = {}
            for name, (vault_op, plain_op) in self._slice_cases(size).items():
                target = 0.01 if size == sizes[-1] else None
                row = self.add(f"{name} 2,000 chars of {_size(size)}", vault_op, plain_op, target, runs=25)
                per_size[size][name] = row.vault_ms
        for name in ("head", "tail", "middle"):
            big, small = per_size[sizes[-1]][name], per_size[sizes[0]][name]
            self.rows.append(Row(f"{name}: vault {_size(sizes[-1])} row vs 64 KiB row", small, big, 2.0))

    def _slice_cases(self, size: int) -> dict[str, tuple[Callable[[], object], Callable[[], object]]]:
        text = text_of(size)
        vault_id = self.vault.put(OWNER, "slices", 0, "x", text).id
        plain_id = self.plain.put("slices", 0, "x", text)
        middle = size // 2
        return {
            "head": (lambda: self.vault.read(OWNER, vault_id, "head", n=SLICE),
                     lambda: self.plain.read(plain_id, 0, SLICE)),
            "tail": (lambda: self.vault.read(OWNER, vault_id, "tail", n=SLICE),
                     lambda: self.plain.tail(plain_id, SLICE)),
            "middle": (lambda: self.vault.read(OWNER, vault_id, "range", start=middle, end=middle + SLICE),
                       lambda: self.plain.read(plain_id, middle, SLICE)),
        }

    def full_reads(self) -> None:
        for size, target in ((1 * MIB, None), (16 * MIB, 1.5)):
            text = text_of(size)
            vault_id = self.vault.put(OWNER, "full", 0, "x", text).id
            plain_id = self.plain.put("full", 0, "x", text)
            self.add(f"full read {_size(size)}", partial(self.vault.get, OWNER, vault_id),
                     partial(self.plain.get, plain_id), target)

    def finds(self) -> None:
        """Find over a whole row (a query that never matches, so every chunk is searched) against reading the row
        whole and searching it: the vault's find, and the plaintext baseline's whole read with ``str.find``."""
        for size in (1 * MIB, (16 if self.quick else 64) * MIB):
            text = text_of(size)
            vault_id = self.vault.put(OWNER, "find", 0, "x", text).id
            plain_id = self.plain.put("find", 0, "x", text)
            self.add(f"find in {_size(size)} (baseline: whole read + str.find)",
                     partial(self.vault.find, OWNER, vault_id, "no such text"),
                     partial(_plain_find, self.plain, plain_id), None, runs=5)
            self.add(f"whole read {_size(size)} + str.find (vault only)",
                     partial(_vault_read_find, self.vault, vault_id), None, None, runs=5)

    def listing(self) -> None:
        text = text_of(2 * KIB)
        for step in range(1000):
            self.vault.put(OWNER, "big-turn", step, "tool", text)
            self.plain.put("big-turn", step, "tool", text)
        self.add("list_for_turn, 1,000 rows", lambda: self.vault.list_for_turn(OWNER, "big-turn"),
                 lambda: self.plain.list_for_turn("big-turn"), 3.0)

    def gc(self) -> None:
        count = 5_000 if self.quick else 100_000
        text = text_of(512)
        past = time.time() - 10
        vault_ms, plain_ms = [], []
        for _ in range(1 if self.quick else 3):
            for step in range(count):
                self.vault.put(OWNER, "gc", step, "tool", text, ttl_seconds=1)
                self.plain.put("gc", step, "tool", text, ttl=1, now=past)
            later = time.time() + 5
            vault_ms.append(timed_ms(partial(self.vault.gc, later), settle=True))
            plain_ms.append(timed_ms(partial(self.plain.gc, later), settle=True))
        self.rows.append(Row(f"gc, {count:,} expired rows", statistics.median(plain_ms),
                             statistics.median(vault_ms), 2.0))

    def rewrap(self) -> None:
        """Rewrap cost is O(rows): the same number of small and large rows take about the same time."""
        count = 200 if self.quick else 1000
        for size in (1 * KIB, 256 * KIB):
            owner = Principal(f"rewrap-{size}")
            text = text_of(size)
            for step in range(count):
                self.vault.put(owner, "rewrap", step, "x", text)
            self.vault.rotate_owner_key(owner.user_id)
            self.vault._store.scrub()  # so the timing is the rewrap's, not the checkpoint of these puts
            vault_ms = median_ms(partial(self.vault.rewrap, owner.user_id), 1)
            self.rows.append(Row(f"rewrap {count:,} rows of {_size(size)} (vault only)", None, vault_ms, None))

    def peak_memory(self) -> None:
        if not memory.available():
            return
        size = (16 if self.quick else 64) * MIB
        text = text_of(size)
        vault_id = self.vault.put(OWNER, "mem", 0, "x", text).id
        plain_id = self.plain.put("mem", 0, "x", text)
        self.memory.append(Memory(f"head 2,000 chars of {_size(size)}",
                                  memory.peak_growth_mib(lambda: self.plain.read(plain_id, 0, SLICE)),
                                  memory.peak_growth_mib(lambda: self.vault.read(OWNER, vault_id, "head", n=SLICE)),
                                  4))
        source = Path(tempfile.mkstemp(dir=os.environ.get("TMPDIR"))[1])
        source.write_text(text)
        del text

        def plain_put() -> None:
            self.plain.put("mem", 1, "x", source.read_text())

        def vault_put() -> None:
            with source.open(encoding="utf-8") as stream:
                self.vault.put(OWNER, "mem", 1, "x", stream)

        self.memory.append(Memory(f"streaming put of {_size(size)} (file)", memory.peak_growth_mib(plain_put),
                                  memory.peak_growth_mib(vault_put), 8))
        source.unlink()


def real_keyring(location: str | Path) -> list[str]:
    """What the OS keyring costs with a vault at ``location`` (a new one): a cold put (key created), a warm put
    (key cached), an open (the index key read)."""
    try:
        vault = Vault.open(location)
    except KeyUnavailable as error:
        return [f"real keyring: not available here ({error})"]
    with vault:
        backend = vault.stats()["keyring_backend"]
        user = Principal(f"bench-{os.getpid()}")
        cold = median_ms(lambda: vault.put(user, "t", 0, "x", "x" * 4096), 1)
        warm = median_ms(lambda: vault.put(user, "t", 0, "x", "x" * 4096), 21)
        reopen = median_ms(lambda: Vault.open(location).close(), 5)
    return [f"real keyring ({backend}): first put for a new owner {cold:.1f} ms (creates its keyset), "
            f"later puts {warm:.2f} ms (key cached), Vault.open {reopen:.1f} ms (reads the index key)"]


def _size(size: int) -> str:
    return f"{size // MIB} MiB" if size >= MIB else f"{size // KIB} KiB"


def main(argv: list[str] | None = None) -> int:
    """Run every case and print the table; exit 0 whatever the numbers (no thresholds in CI)."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes and fewer runs (< 1 minute)")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON to this file")
    parser.add_argument("--repeat", type=int, default=1, help="run the whole benchmark N times; print medians")
    parser.add_argument("--postgres", metavar="URL", nargs="?", const="postgresql://", help="instead: the vault "
                        "over PostgreSQL vs a plaintext table on that server (fresh schemas, dropped after), and the "
                        "SQLite figures beside them; without URL, libpq's PG* environment variables say where")
    parser.add_argument("--plain-storage", metavar="KIND", help="with --postgres: the baseline's content column "
                        "storage (default: PostgreSQL's, EXTENDED)")
    parser.add_argument("--load", action="store_true", help="instead: 8 processes x 2 threads, one store")
    parser.add_argument("--seconds", type=float, default=60.0, help="with --load: how long the load runs")
    parser.add_argument("--locks", action="store_true", help="with --load: time lock waits and holds")
    args = parser.parse_args(argv)
    if args.load:
        return load.main(args.seconds, trace=args.locks, postgres=args.postgres)
    if args.postgres:
        from bench import pg_run

        return pg_run.main(args.postgres, args.quick, args.repeat, args.json, args.plain_storage)
    started = time.time()
    runs = [sqlite_run(args.quick, started) for _ in range(max(1, args.repeat))]
    print(report.render(report.medians([bench.rows for bench in runs]),
                        report.medians([bench.memory for bench in runs])))
    with tempfile.TemporaryDirectory(prefix="scratchvault-bench-") as scratch:
        for line in real_keyring(Path(scratch) / "real.db"):
            print("\n" + line)
    print(f"\n{'quick' if args.quick else 'full'} run x{len(runs)} (medians), {time.time() - started:.0f} s, "
          f"{os.cpu_count()} cores")
    if args.json:
        report.write_json(args.json, report.medians([bench.rows for bench in runs]))
    return 0


def sqlite_run(quick: bool, started: float) -> Bench:
    """One run of every case on SQLite, in a private temporary directory removed after."""
    with tempfile.TemporaryDirectory(prefix="scratchvault-bench-") as scratch:
        os.chmod(scratch, 0o700)
        return Bench.sqlite(Path(scratch), quick).run(started)


def _plain_find(plain: Any, row_id: Any) -> int:
    """The baseline's find: the whole row read, then searched."""
    return int(plain.get(row_id).find("no such text"))


def _vault_read_find(vault: Any, row_id: str) -> int:
    """Reading a vault row whole, then searching it (what find spares)."""
    return int(vault.get(OWNER, row_id).content.find("no such text"))
