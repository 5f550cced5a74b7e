"""The load benchmark (bench/load.py) on the store under test: a short run of two processes whose report has the
shape ``python -m bench --load`` prints (one line per operation timed, then all of them, the small-put tail,
errors and CPU) and no error, the keys the processes share included. On SQLite, and on PostgreSQL in the
PostgreSQL pass (``db_path`` is then a schema on the test server)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from bench import load
from bench.load_report import ORDER, LoadResult, render, render_side_by_side


@pytest.mark.slow  # processes spawned, each importing the vault
def test_a_short_load_run_times_every_operation_it_ran_and_meets_no_error(db_path: Path | str) -> None:
    plan = load.LoadPlan(seconds=1.0, processes=2, threads=2, owners=2)

    result = load.run(str(db_path), plan)

    assert dict(result.errors) == {}
    assert result.samples.get("put <= 64 KiB") or result.samples.get("put > 64 KiB")  # each thread puts first
    assert set(result.samples) <= set(ORDER)
    assert result.elapsed >= plan.seconds and result.client_cpu > 0
    lines = render(result).splitlines()
    measured = [op for op in ORDER if result.samples.get(op)]
    assert lines[0].startswith("| operation | count | p50 ms | p99 ms | max ms |")
    assert [line.split(" | ")[0].removeprefix("| ") for line in lines[2:2 + len(measured) + 1]] == [*measured, "all"]
    assert lines[2 + len(measured)].split(" | ")[1] == f"{sum(len(v) for v in result.samples.values()):,}"
    assert "errors: none" in lines


def test_the_side_by_side_report_has_a_line_per_operation_and_the_targets_per_store() -> None:
    sqlite = LoadResult(samples={"put <= 64 KiB": [1.0, 2.0], "read": [0.5]}, elapsed=1.0, client_cpu=0.5)
    postgres = LoadResult(samples={"put <= 64 KiB": [1.0] * 8, "gc": [3.0]}, errors=Counter(StorageError=1),
                          elapsed=1.0, client_cpu=0.5, server_cpu=0.25)

    report = render_side_by_side(sqlite, postgres, 3.0).splitlines()

    assert report[0] == ("| operation | SQLite p50 / p99 / max ms | PostgreSQL p50 / p99 / max ms | SQLite ops/s | "
                         "PostgreSQL ops/s |")
    assert report[2:6] == ["| put <= 64 KiB | 1.5 / 2.0 / 2.0 | 1.0 / 1.0 / 1.0 | 2.0 | 8.0 |",
                           "| read | 0.5 / 0.5 / 0.5 | - | 1.0 | 0.0 |", "| gc | - | 3.0 / 3.0 / 3.0 | 0.0 | 1.0 |",
                           "| all | | | 3.0 | 9.0 |"]
    assert "PostgreSQL / SQLite ops/s: 3.00 (target >= 3)" in report
    assert report[-2].startswith("SQLite: put <= 64 KiB p99 / p50 = 1.3 (target <= 10); errors: none; CPU: ")
    assert report[-1].startswith("PostgreSQL: put <= 64 KiB p99 / p50 = 1.0 (target <= 10); errors: StorageError 1; "
                                 "CPU: clients 0.5 s + server 0.2 s")
