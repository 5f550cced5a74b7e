"""Fixtures of the system tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def ring(tmp_path, monkeypatch) -> Path:
    """A file keyring of the test's own, named to every process the test starts (an earlier release's included)."""
    path = tmp_path / "ring.json"
    monkeypatch.setenv("SCRATCHVAULT_TEST_KEYRING", str(path))
    return path
