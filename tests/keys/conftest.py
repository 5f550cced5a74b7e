"""Fixtures the key tests share."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from vault import storage
from vault.storage import Store


@pytest.fixture
def stores(db_path) -> Iterator[Callable[[], Store]]:
    """Opens stores over ``db_path`` (each one process's view of the shared database), closed after the test."""
    opened: list[Store] = []

    def open_store() -> Store:
        opened.append(storage.open_store(db_path))
        return opened[-1]

    yield open_store
    for store in opened:
        store.close()
