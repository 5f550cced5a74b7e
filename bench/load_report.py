"""What a load run measured (bench/load.py) and its tables: one store's, or SQLite's and PostgreSQL's side by side."""

from __future__ import annotations

import math
import os
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from bench import locktrace

ORDER = ("put <= 64 KiB", "put > 64 KiB", "read", "delete", "extend_turn", "gc")
SMALL_PUT = ORDER[0]
TAIL_TARGET = 10.0  # a small put's p99 within this many times its p50
NOT_VAULT_ERROR = "NOT A VaultError: "  # the prefix of an error type that escaped the API: a bug


@dataclass
class LoadResult:
    """Latencies (ms) by operation, errors by type, SQLite lock timings by operation (``--locks``), the seconds
    the run took, and the CPU seconds it cost: its processes' (the store's own work too on SQLite), a local
    PostgreSQL server's (None: not measured), the whole machine's (others' work included)."""

    samples: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: Counter[str] = field(default_factory=Counter)
    locks: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    elapsed: float = 0.0
    client_cpu: float = 0.0
    server_cpu: float | None = None
    machine_cpu: float | None = None

    @classmethod
    def gathered(cls, workers: Iterable[tuple[dict[str, list[float]], Counter[str]]],
                 locks: dict[str, list[float]], cpu: float) -> LoadResult:
        """One process's result: its workers' samples and errors, its lock timings and CPU seconds."""
        result = cls(client_cpu=cpu)
        for samples, errors in workers:
            result.add(samples, errors)
        result.add({}, Counter(), locks)
        return result

    @classmethod
    def merged(cls, parts: Iterable[LoadResult], elapsed: float) -> LoadResult:
        """The processes' results as one run that took ``elapsed`` seconds."""
        result = cls(elapsed=elapsed)
        for part in parts:
            result.add(part.samples, part.errors, part.locks)
            result.client_cpu += part.client_cpu
        return result

    def add(self, samples: dict[str, list[float]], errors: Counter[str],
            locks: dict[str, list[float]] | None = None) -> None:
        for op, values in samples.items():
            self.samples[op] += values
        self.errors.update(errors)
        for key, values in (locks or {}).items():
            self.locks[key] += values

    def operations(self) -> list[str]:
        """The operations measured, in the table's order."""
        return [op for op in (*ORDER, *sorted(set(self.samples) - set(ORDER))) if self.samples.get(op)]

    def ops_per_second(self, op: str | None = None) -> float:
        """Operations done per second: of ``op``, or (None) of all."""
        done = len(self.samples.get(op, ())) if op else sum(len(v) for v in self.samples.values())
        return done / self.elapsed if self.elapsed else 0.0

    def tail_ratio(self) -> float | None:
        """A small put's p99 over its p50 (None: no small put was timed)."""
        small = self.samples.get(SMALL_PUT)
        return percentile(small, 0.99) / statistics.median(small) if small else None

    def escaped(self) -> bool:
        """True when an error that is not a VaultError left the API."""
        return any(kind.startswith(NOT_VAULT_ERROR) for kind in self.errors)

    def errors_line(self) -> str:
        return ", ".join(f"{kind} {count}" for kind, count in sorted(self.errors.items())) or "none"

    def cpu_line(self) -> str:
        """CPU seconds spent, per operation, and how busy the machine's cores were meanwhile."""
        done = sum(len(v) for v in self.samples.values()) or 1
        spent = self.client_cpu + (self.server_cpu or 0.0)
        server = "" if self.server_cpu is None else f" + server {self.server_cpu:.1f} s"
        line = f"CPU: clients {self.client_cpu:.1f} s{server} = {spent / done * 1000:.1f} ms an operation"
        if self.machine_cpu is not None and self.elapsed:
            cores = os.cpu_count() or 1
            line += f"; the machine's {cores} cores {self.machine_cpu / (self.elapsed * cores):.0%} busy (all users)"
        return line


def percentile(values: list[float], share: float) -> float:
    """The ``share`` quantile (nearest rank) of ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(share * len(ordered)) - 1))]


def _latencies(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} / {percentile(values, 0.99):.1f} / {max(values):.1f}"


def render(result: LoadResult) -> str:
    """One store's table as Markdown, then the small-put ratio, errors and (with ``--locks``) lock timings."""
    lines = ["| operation | count | p50 ms | p99 ms | max ms | mean ms | ops/s |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for op in result.operations():
        values = result.samples[op]
        lines.append(f"| {op} | {len(values):,} | {_latencies(values).replace(' / ', ' | ')} | "
                     f"{statistics.fmean(values):.1f} | {result.ops_per_second(op):.1f} |")
    total = sum(len(v) for v in result.samples.values())
    lines.append(f"| all | {total:,} | | | | | {result.ops_per_second():.1f} |")
    ratio = result.tail_ratio()
    if ratio is not None:
        lines.append(f"\n{SMALL_PUT}: p99 / p50 = {ratio:.1f} (target <= {TAIL_TARGET:g})")
    lines.append("errors: " + result.errors_line())
    lines.append(result.cpu_line())
    if result.locks:
        lines += ["", locktrace.render(result.locks)]
    return "\n".join(lines)


def render_side_by_side(sqlite: LoadResult, postgres: LoadResult, throughput_target: float | None) -> str:
    """Both stores' p50 / p99 / max and ops/s per operation, then the targets: PostgreSQL's ops/s over SQLite's
    (at least ``throughput_target``, None: none), each store's small-put p99 / p50, and errors."""
    lines = ["| operation | SQLite p50 / p99 / max ms | PostgreSQL p50 / p99 / max ms | SQLite ops/s | "
             "PostgreSQL ops/s |", "|---|---:|---:|---:|---:|"]
    for op in [op for op in ORDER if op in sqlite.samples or op in postgres.samples]:
        cells = [_latencies(result.samples[op]) if result.samples.get(op) else "-" for result in (sqlite, postgres)]
        lines.append(f"| {op} | {cells[0]} | {cells[1]} | {sqlite.ops_per_second(op):.1f} | "
                     f"{postgres.ops_per_second(op):.1f} |")
    lines.append(f"| all | | | {sqlite.ops_per_second():.1f} | {postgres.ops_per_second():.1f} |")
    speedup = postgres.ops_per_second() / sqlite.ops_per_second() if sqlite.ops_per_second() else math.inf
    wanted = "" if throughput_target is None else f" (target >= {throughput_target:g})"
    lines.append(f"\nPostgreSQL / SQLite ops/s: {speedup:.2f}{wanted}")
    for name, result in (("SQLite", sqlite), ("PostgreSQL", postgres)):
        ratio = result.tail_ratio()
        tail = "-" if ratio is None else f"{ratio:.1f}"
        lines.append(f"{name}: {SMALL_PUT} p99 / p50 = {tail} (target <= {TAIL_TARGET:g}); "
                     f"errors: {result.errors_line()}; {result.cpu_line()}")
    return "\n".join(lines)
