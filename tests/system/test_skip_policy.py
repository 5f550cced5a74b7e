"""Skips are never silent (tests/support/skips.py): a pytest run of a small suite with one skipped test, under
the strict setting ``bash scripts/run test`` uses and without it, against a list that allows the skip or not."""

from __future__ import annotations

import fnmatch
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.repository import ROOT, child_env
from tests.support.skips import DEFAULT_LIST, allowed_skips

SUITE = '''
import pytest

def test_runs():
    pass

def test_needs_a_mount():
    pytest.skip("cannot mount a tmpfs here")
'''
LISTS = {"empty": "skip = []\n",
         "allowing": '[[skip]]\ntests = "test_suite.py::test_needs_*"\nreason = "cannot mount"\nwhen = "always"\n'
                     'why = "the test of the list"\n'}


def run(tmp_path: Path, listed: str, strict: bool) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_suite.py").write_text(SUITE)
    (tmp_path / "allowed.toml").write_text(LISTS[listed])
    env = {**child_env(), "PYTHONPATH": str(ROOT), "SCRATCHVAULT_ALLOWED_SKIPS": str(tmp_path / "allowed.toml"),
           "SCRATCHVAULT_STRICT_SKIPS": "1" if strict else "0"}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.support.skips", "-p", "no:cacheprovider",
                           "-q", "test_suite.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120, check=False)


def test_an_unlisted_skip_fails_a_strict_run_and_names_the_test_and_its_reason(tmp_path):
    result = run(tmp_path, "empty", strict=True)
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, result.stdout
    assert "FAILS THE RUN: test_suite.py::test_needs_a_mount: cannot mount a tmpfs here" in result.stdout


def test_a_listed_skip_passes_a_strict_run_and_is_still_reported(tmp_path):
    result = run(tmp_path, "allowing", strict=True)
    assert result.returncode == pytest.ExitCode.OK, result.stdout
    assert "1 skipped, 1 of them as" in result.stdout and "FAILS THE RUN" not in result.stdout


def test_outside_the_strict_setting_an_unlisted_skip_is_reported_not_failed(tmp_path):
    result = run(tmp_path, "empty", strict=False)
    assert result.returncode == pytest.ExitCode.OK, result.stdout
    assert "not in the list: test_suite.py::test_needs_a_mount: cannot mount a tmpfs here" in result.stdout


def test_every_entry_of_the_list_names_tests_that_exist():
    files = [str(path.relative_to(ROOT)) for path in (ROOT / "tests").rglob("test_*.py")]
    for entry in allowed_skips(DEFAULT_LIST):
        assert any(fnmatch.fnmatchcase(name + "::x", entry.tests) for name in files), entry.tests
