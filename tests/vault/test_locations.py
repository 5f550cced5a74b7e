"""A location written as a URL is never taken for a path (``Vault.open("postgresql://...")`` must not create a
directory tree named ``postgresql:`` in the working directory with a SQLite file in it). A URL of a scheme the vault
has no store for is a clear InvalidArgument; a PostgreSQL URL opens that store, and one no server answers is a
StorageError at once. Neither shows the URL's password, in a message or a log line, and nothing is made in the
working directory."""

from __future__ import annotations

import logging
import os
import time

import pytest

from keys.testing import MemoryKeyring
from vault import InvalidArgument, StorageError, Vault

SECRET = "hunter2-CANARY"
URLS = [f"postgresql://alice:{SECRET}@db.example/vault", f"postgres://alice:{SECRET}@/vault?host=/run/pg",
        f"POSTGRESQL://alice:{SECRET}@h/v", f"mysql://alice:{SECRET}@h/v", f"s3://bucket/{SECRET}",
        f"https://alice:{SECRET}@example.org/v.db"]


@pytest.mark.parametrize("url", URLS)
def test_a_url_is_refused_clearly_without_its_password_and_nothing_is_made(url, tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PGCONNECT_TIMEOUT", "2")
    caplog.set_level(logging.DEBUG)
    postgres = url.lower().startswith("postgres")
    started = time.monotonic()
    with pytest.raises(StorageError if postgres else InvalidArgument) as raised:
        Vault.open(url, keyring_backend=MemoryKeyring())
    assert time.monotonic() - started < 20  # refused, not retried until a pool gives up
    assert SECRET not in str(raised.value) and SECRET not in repr(raised.value)
    assert SECRET not in caplog.text
    if not postgres:
        assert "postgresql://" in str(raised.value)
    assert os.listdir(tmp_path) == []


def test_a_path_with_a_colon_is_still_a_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.mkdir("data", 0o700)
    with Vault.open("data/not:a-url.db", keyring_backend=MemoryKeyring()) as vault:
        assert vault.stats()["rows"] == 0
    assert (tmp_path / "data" / "not:a-url.db").exists()


@pytest.mark.parametrize("size", [0, 1001, "8", 2.0, True])
def test_a_pool_size_out_of_range_or_not_an_int_is_refused(size, tmp_path):
    with pytest.raises(InvalidArgument, match="pool_size"):
        Vault.open("postgresql://alice@/vault?host=/nonexistent", keyring_backend=MemoryKeyring(), pool_size=size)


def test_a_pool_size_for_a_sqlite_path_is_refused_not_ignored(tmp_path):
    with pytest.raises(InvalidArgument, match="PostgreSQL"):
        Vault.open(tmp_path / "v.db", keyring_backend=MemoryKeyring(), pool_size=4)
    assert os.listdir(tmp_path) == []
