"""The SQLite store runs the store contract: a file per store in the test's private (0700) directory."""

from __future__ import annotations

import sqlite3
from contextlib import closing

import pytest

from tests.storage.contract import StoreContract
from vault.storage import open_store
from vault.storage.sqlite import rows as sqlite_rows
from vault.storage.sqlite import store as sqlite_store


class TestSqliteStore(StoreContract):
    @pytest.fixture
    def make_store(self, vault_dir):
        return lambda name="store": open_store(vault_dir / f"{name}.db")

    @pytest.fixture
    def plant(self, vault_dir):
        """The file's writer: statements run on the store called "store" by another connection."""
        def run(*statements: str) -> None:
            with closing(sqlite3.connect(vault_dir / "store.db")) as connection:
                for statement in statements:
                    connection.execute(statement)
                connection.commit()
        return run

    @pytest.fixture
    def small_batches(self, monkeypatch) -> int:
        monkeypatch.setattr(sqlite_store, "GC_BATCH", 2)
        monkeypatch.setattr(sqlite_rows, "LOOKUP_BATCH", 2)
        return 2

    def test_the_file_systems_free_space_is_reported(self, store):
        disk = store.stats(0.0)["disk"]
        assert all(type(value) is int and value >= 0 for value in disk.values())
        assert 0 < disk["free_bytes"] <= disk["file_system_bytes"]
