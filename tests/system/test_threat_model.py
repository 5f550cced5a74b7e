"""threat_model.md cannot drift from the tests: every test it names exists and is neither skipped nor xfail.

The node ids are read from the tables of its sections "Properties and their mitigations" and "Adversarial
tests", then collected by pytest in a subprocess (``--collect-only``) with a small plugin that reports each
collected item's markers. A test marked ``real_keyring`` does not count either: a plain ``pytest`` run (no
Secret Service) skips it, and every test the document names must run on every run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.repository import ROOT

SECTIONS = ("Properties and their mitigations", "Adversarial tests")
NODE_ID = re.compile(r"`(tests/[\w/]+\.py::[^`\s]+)`")
NOT_RUN = {"skip", "skipif", "xfail", "real_keyring"}  # real_keyring tests skip without a Secret Service
PLUGIN = '''
import json, os

def pytest_collection_finish(session):
    found = {item.nodeid: sorted({mark.name for mark in item.iter_markers()}) for item in session.items}
    with open(os.environ["NODE_REPORT"], "w") as report:
        json.dump(found, report)
'''


def table_rows(section: str) -> list[str]:
    """The table lines (after the header and rule) of one ``## section`` of threat_model.md."""
    text = (ROOT / "threat_model.md").read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(section)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert match, f"threat_model.md has no section '{section}'"
    lines = [line for line in match.group(1).splitlines() if line.startswith("|")]
    assert len(lines) > 2, f"section '{section}' has no table"
    return lines[2:]


def named_ids() -> dict[str, list[str]]:
    """Each table row (its first cell) -> the node ids in its last cell."""
    rows = {}
    for section in SECTIONS:
        for line in table_rows(section):
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            rows[f"{section}: {cells[0]} {cells[1][:40]}"] = NODE_ID.findall(cells[-1])
    return rows


def test_every_table_row_names_tests():
    rows = named_ids()
    properties = [ids for name, ids in rows.items() if name.startswith(SECTIONS[0])]
    adversarial = [ids for name, ids in rows.items() if name.startswith(SECTIONS[1])]
    assert len(properties) >= 10 and len(adversarial) >= 9, "a table lost its rows"
    assert all(len(ids) >= 2 for ids in properties), "a property names fewer than two tests"
    assert {name for name, ids in rows.items() if not ids} == set(), "a row names no test node id"


def collect(nodes: list[str], directory: Path, cwd: Path = ROOT) -> tuple[int, str, dict[str, list[str]]]:
    """pytest --collect-only of ``nodes`` (run in ``cwd``) in a subprocess: (exit code, output, {node id: marker
    names})."""
    (directory / "node_report_plugin.py").write_text(PLUGIN)
    report = directory / "report.json"
    env = {**os.environ, "NODE_REPORT": str(report),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(directory), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "node_report_plugin", "-p", "no:cacheprovider",
         *nodes], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    return done.returncode, done.stdout, json.loads(report.read_text()) if report.exists() else {}


def not_run(node: str, collected: dict[str, list[str]]) -> dict[str, list[str]] | None:
    """None if ``node`` collects nothing, else its items marked skip / skipif / xfail."""
    items = {item: set(marks) for item, marks in collected.items()
             if item == node or item.startswith((node + "[", node + "::"))}
    return {item: sorted(NOT_RUN & marks) for item, marks in items.items() if NOT_RUN & marks} if items else None


def test_every_named_test_exists_and_is_not_skipped_or_xfail(tmp_path):
    wanted = sorted({node for ids in named_ids().values() for node in ids})
    assert len(wanted) >= 30, "the tables name suspiciously few tests"
    code, output, collected = collect(wanted, tmp_path)
    assert code == 0, f"collection failed (a named test does not exist?):\n{output[-3000:]}"
    for node in wanted:
        marked = not_run(node, collected)
        assert marked is not None, f"{node} named in threat_model.md collects no test"
        assert marked == {}, f"{node} is named in threat_model.md but marked {marked}"


@pytest.mark.parametrize("bad", [
    "tests/vault/test_isolation.py::test_no_such_test", "tests/test_nonexistent.py::test_x",
    "tests/attacks/test_tampering.py::test_tampered_row_never_yields_altered_content[no_such_case]"])
def test_the_check_rejects_a_missing_test(tmp_path, bad):
    code, _, collected = collect([bad], tmp_path)
    assert code != 0 or not_run(bad, collected) is None


FAKE = """
import pytest

def test_plain(): pass

@pytest.mark.xfail(strict=True, reason="x")
def test_xfail(): pass

@pytest.mark.skipif(True, reason="x")
def test_skipif(): pass

@pytest.mark.parametrize("n", [1, pytest.param(2, marks=pytest.mark.skip)])
def test_one_param_skipped(n): pass

@pytest.mark.real_keyring
def test_needs_the_os_keyring(): pass
"""


def test_the_check_rejects_skipped_and_xfail_tests(tmp_path):
    (tmp_path / "test_fake.py").write_text(FAKE)
    nodes = ["test_fake.py::" + name for name in (
        "test_plain", "test_xfail", "test_skipif", "test_one_param_skipped", "test_needs_the_os_keyring")]
    code, _, collected = collect(nodes, tmp_path, cwd=tmp_path)
    assert code == 0
    assert [not_run(node, collected) for node in nodes] == [
        {}, {nodes[1]: ["xfail"]}, {nodes[2]: ["skipif"]}, {nodes[3] + "[2]": ["skip"]}, {nodes[4]: ["real_keyring"]}]
