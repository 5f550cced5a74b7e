"""No silent skips: every skipped test is reported with its reason at the end of the run, and under
``SCRATCHVAULT_STRICT_SKIPS=1`` (which ``bash scripts/run test`` sets) a skip that tests/allowed_skips.toml does
not list fails the run. An entry names the tests it covers (a glob over node ids), the reason they must give (a
prefix of the skip message), when it applies (``always``, ``postgres store``, ``sqlite store``, ``not root``) and why.

Loaded by tests/conftest.py (its hooks re-exported there), or as ``-p tests.support.skips``.
"""

from __future__ import annotations

import fnmatch
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

STRICT_ENV = "SCRATCHVAULT_STRICT_SKIPS"
LIST_ENV = "SCRATCHVAULT_ALLOWED_SKIPS"  # another list (the tests of this module use their own)
DEFAULT_LIST = Path(__file__).resolve().parent.parent / "allowed_skips.toml"
CONDITIONS = {"always": lambda: True,
              "postgres store": lambda: os.environ.get("SCRATCHVAULT_TEST_STORE") == "postgres",
              "sqlite store": lambda: os.environ.get("SCRATCHVAULT_TEST_STORE", "sqlite") != "postgres",
              "not root": lambda: os.geteuid() != 0}


@dataclass(frozen=True)
class Allowed:
    tests: str
    reason: str
    when: str
    why: str

    def covers(self, nodeid: str, reason: str) -> bool:
        return (fnmatch.fnmatchcase(nodeid, self.tests) and reason.startswith(self.reason)
                and CONDITIONS[self.when]())


def allowed_skips(path: Path | None = None) -> list[Allowed]:
    """The entries of the list; a malformed one is an error, never ignored."""
    source = path or Path(os.environ.get(LIST_ENV) or DEFAULT_LIST)
    entries = [Allowed(**entry) for entry in tomllib.loads(source.read_text())["skip"]]
    for entry in entries:
        if entry.when not in CONDITIONS or not entry.reason or not entry.why:
            raise ValueError(f"{source}: bad entry {entry}")
    return entries


def skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return reason.removeprefix("Skipped: ")


_skipped: list[tuple[str, str]] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        _skipped.append((report.nodeid, skip_reason(report)))


def unlisted(skipped: list[tuple[str, str]], entries: list[Allowed]) -> list[tuple[str, str]]:
    return [(nodeid, reason) for nodeid, reason in skipped
            if not any(entry.covers(nodeid, reason) for entry in entries)]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if os.environ.get(STRICT_ENV) == "1" and unlisted(_skipped, allowed_skips()) and exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _skipped:
        return
    entries = allowed_skips()
    outside = unlisted(_skipped, entries)
    strict = os.environ.get(STRICT_ENV) == "1"
    terminalreporter.section("skipped tests", sep="=", bold=True, red=bool(outside and strict))
    terminalreporter.line(f"{len(_skipped)} skipped, {len(_skipped) - len(outside)} of them as "
                          f"{DEFAULT_LIST.name} allows")
    for nodeid, reason in outside:
        verdict = "FAILS THE RUN" if strict else "not in the list"
        terminalreporter.line(f"{verdict}: {nodeid}: {reason}")
