"""The PostgreSQL store runs the store contract: a schema per store on the throwaway server the test command
starts (tests/support/postgres.py)."""

from __future__ import annotations

import psycopg
import pytest

from tests.storage.contract import StoreContract
from vault.storage import open_store
from vault.storage.postgres import store as postgres_store

pytestmark = pytest.mark.postgres


class TestPostgresStore(StoreContract):
    @pytest.fixture
    def make_store(self, pg_schemas):
        return lambda name="store": open_store(pg_schemas(name))

    @pytest.fixture
    def plant(self, pg_schemas):
        """The role that owns the tables (the README's vault_owner): statements run in the store's schema."""
        def run(*statements: str) -> None:
            with psycopg.connect(pg_schemas("store"), autocommit=True) as connection:
                for statement in statements:
                    connection.execute(statement)
        return run

    @pytest.fixture
    def small_batches(self, monkeypatch) -> int:
        monkeypatch.setattr(postgres_store, "GC_BATCH", 2)
        return 2
