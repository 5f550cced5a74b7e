"""The PostgreSQL store runs the store contract: a schema per store on the throwaway server the test command
starts (tests/support/postgres.py)."""

from __future__ import annotations

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
    def small_batches(self, monkeypatch) -> int:
        monkeypatch.setattr(postgres_store, "GC_BATCH", 2)
        return 2
