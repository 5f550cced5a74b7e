"""The README's example and the demo run as written, against the real OS keyring."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.support.repository import ROOT


def readme_example() -> str:
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "the README has no Python example"
    return blocks[0]


def test_readme_example_is_at_most_30_lines():
    assert len(readme_example().strip().splitlines()) <= 30


@pytest.mark.real_keyring
def test_readme_example_runs_against_the_os_keyring(real_keyring, tmp_path, monkeypatch):
    data_home = tmp_path / "data"
    data_home.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_DATA_HOME", str(data_home))
    exec(compile(readme_example(), "README.md", "exec"), {"__name__": "readme"})
    assert (data_home / "scratchvault" / "scratchpad.db").stat().st_mode & 0o777 == 0o600


@pytest.mark.real_keyring
def test_demo_runs_and_shows_the_refusal_expiry_and_a_clean_disk(real_keyring):
    result = subprocess.run([sys.executable, "-m", "vault", "demo"], cwd=ROOT, capture_output=True, text=True,
                            timeout=120, env=os.environ.copy(), check=False)
    assert result.returncode == 0, result.stderr
    assert "SecretService" in result.stdout
    assert "refused: NotFound" in result.stdout
    assert "unreadable, before any gc" in result.stdout
    assert "gc removed 1 row(s)" in result.stdout
    assert "bob's row in the backup copy: unreadable" in result.stdout
    assert "plaintext canaries found in the database files: none" in result.stdout
