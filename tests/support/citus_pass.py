"""The tests the Citus pass leaves out of the suites it runs with the vault on the coordinator (scripts/citus.sh,
``run_citus_suites``, which sets SCRATCHVAULT_TEST_POSTGRES_CITUS=1): each named here, and only here, with the
reason, deselected at collection and listed with that reason at the end of the run, never skipped in silence.

An entry is a glob over node ids. One that matches no collected test of a file the run collected is stale and
fails the collection: a renamed test must not leave an entry that no longer leaves anything out.

Loaded by tests/conftest.py (``leave_out`` after its own selection, ``report`` in its terminal summary).
"""

from __future__ import annotations

import fnmatch

import pytest

from tests.support.postgres import citus_required

# (node id glob, why the Citus pass does not run it; where what it checks is covered instead)
LEFT_OUT: tuple[tuple[str, str], ...] = (
    ("tests/attacks/test_tampering.py::test_every_column_tampered_never_yields_altered_content_or_deletes*",
     "tampers a fresh copy of the vault per variant, open and closed: a schema distributed anew for each, "
     "minutes per table on Citus; the sweep runs in the PostgreSQL pass (the checks that refuse it are the "
     "vault's, whatever the store), and this pass keeps the row swaps, the parts moved between turns and owners, "
     "and the summary and held-part tampering"),
)

_left_out: dict[str, int] = {}  # entry glob -> how many tests it left out of this run


def leave_out(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In the Citus pass, deselect (reported as such) the tests LEFT_OUT names; fail on a stale entry."""
    if not citus_required():
        return
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    files = {item.nodeid.split("::", 1)[0] for item in items}
    for item in items:
        entry = next((glob for glob, _ in LEFT_OUT if fnmatch.fnmatchcase(item.nodeid, glob)), None)
        if entry is None:
            kept.append(item)
        else:
            dropped.append(item)
            _left_out[entry] = _left_out.get(entry, 0) + 1
    stale = [glob for glob, _ in LEFT_OUT if glob.split("::", 1)[0] in files and glob not in _left_out]
    if stale:
        raise pytest.UsageError(f"tests/support/citus_pass.py: no collected test matches {stale}")
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def report(terminalreporter: pytest.TerminalReporter) -> None:
    """Each entry that left tests out of this run, with how many and why."""
    if not _left_out:
        return
    terminalreporter.section("left out of the Citus pass", sep="=", bold=True)
    for glob, why in LEFT_OUT:
        if glob in _left_out:
            terminalreporter.line(f"{_left_out[glob]} x {glob}: {why}")
