"""The PostgreSQL store (``store.py``): the same vault over a server several hosts share. Importable without the
optional ``postgres`` extra; opening a store without it is an InvalidArgument that says how to install it."""

from __future__ import annotations

from vault.storage.base import Store
from vault.storage.postgres.connections import require_driver

DEFAULT_POOL_SIZE = 8


def open_postgres(url: str, pool_size: int = DEFAULT_POOL_SIZE) -> Store:
    """The vault's store in the database ``url`` names (libpq URL syntax; PG* environment variables fill in what
    it leaves out), its tables made on first use."""
    require_driver()
    from vault.storage.postgres.store import PostgresStore

    return PostgresStore(url, pool_size)
