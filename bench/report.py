"""The benchmark's results: rows of the table, medians over repeated runs, and the tables as Markdown."""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Row:
    """One line of the result table."""

    case: str
    baseline_ms: float | None
    vault_ms: float
    target: float | None

    @property
    def ratio(self) -> float | None:
        return None if self.baseline_ms is None else self.vault_ms / self.baseline_ms


@dataclass
class Memory:
    """One line of the peak memory table (RSS growth, MiB)."""

    case: str
    baseline_mib: float
    vault_mib: float
    target: float


def medians(runs: list[list[Row]] | list[list[Memory]]) -> list:
    """One row per case: each figure the median of its runs (the ratio, then, of the medians)."""
    if len(runs) == 1:
        return list(runs[0])
    merged = []
    for same in zip(*runs, strict=True):
        first = same[0]
        values = {name: _median([getattr(row, name) for row in same]) for name in vars(first)
                  if name not in ("case", "target")}
        merged.append(type(first)(case=first.case, target=first.target, **values))
    return merged


def _median(values: list[float | None]) -> float | None:
    known = [value for value in values if value is not None]
    return None if len(known) != len(values) else statistics.median(known)


def render(rows: list[Row], memory: list[Memory]) -> str:
    """The result table, and the memory table if there is one, as Markdown."""
    lines = ["| case | baseline ms | vault ms | ratio | target | ok |", "|---|---:|---:|---:|---:|:-:|"]
    for row in rows:
        ratio = "" if row.ratio is None else f"{row.ratio:.3f}"
        ok = "" if row.target is None or row.ratio is None else ("yes" if row.ratio <= row.target else "NO")
        base = "" if row.baseline_ms is None else f"{row.baseline_ms:.3f}"
        lines.append(f"| {row.case} | {base} | {row.vault_ms:.3f} | {ratio} | "
                     f"{'' if row.target is None else f'<= {row.target:g}'} | {ok} |")
    if memory:
        lines += ["", "| peak memory (RSS growth) | baseline MiB | vault MiB | over baseline | target | ok |",
                  "|---|---:|---:|---:|---:|:-:|"]
        for line in memory:
            over = line.vault_mib - line.baseline_mib
            lines.append(f"| {line.case} | {line.baseline_mib:.1f} | {line.vault_mib:.1f} | {over:+.1f} | "
                         f"<= {line.target:g} MiB | {'yes' if over <= line.target else 'NO'} |")
    return "\n".join(lines)


def render_stores(postgres: list[Row], sqlite: list[Row]) -> str:
    """The same cases on both stores: the vault's and the baseline's times, and PostgreSQL / SQLite."""
    on_sqlite = {row.case: row for row in sqlite}
    lines = ["| case | vault SQLite ms | vault PostgreSQL ms | PostgreSQL / SQLite | plain SQLite ms | "
             "plain PostgreSQL ms |", "|---|---:|---:|---:|---:|---:|"]
    for row in postgres:
        other = on_sqlite.get(row.case)
        if other is None or " vs " in row.case:
            continue
        plain = ("", "") if row.baseline_ms is None or other.baseline_ms is None else (
            f"{other.baseline_ms:.3f}", f"{row.baseline_ms:.3f}")
        lines.append(f"| {row.case} | {other.vault_ms:.3f} | {row.vault_ms:.3f} | "
                     f"{row.vault_ms / other.vault_ms:.2f} | {plain[0]} | {plain[1]} |")
    return "\n".join(lines)


def write_json(path: Path, rows: list[Row], **more: list[Row]) -> None:
    """The rows, with their ratios, as JSON (with ``more``: an object of the rows and each other list by name)."""
    def listed(some: list[Row]) -> list[dict]:
        return [row.__dict__ | {"ratio": row.ratio} for row in some]

    body = listed(rows) if not more else {"rows": listed(rows)} | {name: listed(v) for name, v in more.items()}
    path.write_text(json.dumps(body, indent=2))
