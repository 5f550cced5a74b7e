"""The SQL statements a vault's store sends from this thread while a block runs, on either store: SQLite's through
the thread's connection's trace callback, PostgreSQL's through a cursor class on each connection the block takes
from the pool. What a test of round trips counts (nothing in the vault is replaced: the statements still run)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from vault import Vault


@contextmanager
def statements_sent(vault: Vault) -> Iterator[list[str]]:
    """Each statement the vault's store sends from this thread inside the block, in order."""
    sent: list[str] = []
    store: Any = vault._store
    if hasattr(store, "pool"):
        with _counted_on_postgres(store.pool, sent):
            yield sent
        return
    connection = store._connections.acquire()  # this thread's connection, the one its snapshots use
    try:
        connection.set_trace_callback(sent.append)
        yield sent
    finally:
        connection.set_trace_callback(None)
        store._connections.release(connection)


@contextmanager
def _counted_on_postgres(pool: Any, sent: list[str]) -> Iterator[None]:
    import psycopg

    class CountingCursor(psycopg.Cursor):
        def execute(self, query: Any, params: Any = None, **options: Any) -> Any:
            sent.append(str(query))
            return super().execute(query, params, **options)

    taken: list[psycopg.Connection] = []
    get = pool.get

    def counted_get() -> psycopg.Connection:
        connection = get()
        connection.cursor_factory = CountingCursor
        taken.append(connection)
        return connection

    pool.get = counted_get
    try:
        yield
    finally:
        del pool.get
        for connection in taken:
            connection.cursor_factory = psycopg.Cursor
