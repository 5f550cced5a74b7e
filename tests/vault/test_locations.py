"""A location written as a URL is never taken for a path: ``Vault.open("postgresql://...")`` used to create a
directory tree named ``postgresql:`` in the working directory and a SQLite file in it (issue 14). Until the
PostgreSQL store lands it is a clear InvalidArgument that never shows the URL's password, and nothing is made."""

from __future__ import annotations

import os

import pytest

from keys.testing import MemoryKeyring
from vault import InvalidArgument, Vault

SECRET = "hunter2-CANARY"
URLS = [f"postgresql://alice:{SECRET}@db.example/vault", f"postgres://alice:{SECRET}@/vault?host=/run/pg",
        f"POSTGRESQL://alice:{SECRET}@h/v", f"mysql://alice:{SECRET}@h/v", f"s3://bucket/{SECRET}",
        f"https://alice:{SECRET}@example.org/v.db"]


@pytest.mark.parametrize("url", URLS)
def test_a_url_is_refused_clearly_without_its_password_and_nothing_is_made(url, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidArgument) as raised:
        Vault.open(url, keyring_backend=MemoryKeyring())
    assert SECRET not in str(raised.value) and SECRET not in repr(raised.value)
    assert ("PostgreSQL" in str(raised.value)) == url.lower().startswith("postgres")
    assert os.listdir(tmp_path) == []


def test_a_path_with_a_colon_is_still_a_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.mkdir("data", 0o700)
    with Vault.open("data/not:a-url.db", keyring_backend=MemoryKeyring()) as vault:
        assert vault.stats()["rows"] == 0
    assert (tmp_path / "data" / "not:a-url.db").exists()
