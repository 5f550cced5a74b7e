"""Every PostgreSQL connection the store uses commits with the settings a returned put needs to survive a crash:
``synchronous_commit`` on, local, remote_write or remote_apply (each waits for the local WAL flush) and
``fsync`` on, read in the transaction itself just before each COMMIT, on every thread, through every public
operation that writes. A session that turned either off (``SET synchronous_commit = off``) fails here."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from keys.testing import MemoryKeyring
from tests.storage.sqlite.test_durability_settings import every_write
from tests.support.clock import FakeClock
from vault import Principal, Vault

pytestmark = pytest.mark.postgres
DURABLE_COMMITS = ("on", "local", "remote_write", "remote_apply")
READ = "SELECT current_setting('synchronous_commit'), current_setting('fsync'), pg_backend_pid()"


@pytest.fixture
def commits(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, str, int]]]:
    """(synchronous_commit, fsync, backend pid) in force at each COMMIT any connection of this process sends."""
    found: list[tuple[str, str, int]] = []
    lock = threading.Lock()
    execute = psycopg.Connection.execute

    def checked(connection: psycopg.Connection, query: Any, *args: Any, **kwargs: Any) -> psycopg.Cursor:
        if isinstance(query, str) and query.strip().upper().startswith("COMMIT"):
            row = execute(connection, READ).fetchone()
            assert row is not None
            with lock:
                found.append((str(row[0]), str(row[1]), int(row[2])))
        return execute(connection, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Connection, "execute", checked)
    yield found


def puts_at_once(vault: Vault) -> None:
    """Four threads putting together: the pool opens more than one connection."""
    start = threading.Barrier(4)

    def work(n: int) -> None:
        start.wait()
        for step in range(5):
            vault.put(Principal(f"user{n}"), "t", step, "x", "concurrent " * 200)

    workers = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


def test_every_connection_commits_with_synchronous_commit_and_fsync_on(commits, pg_location) -> None:
    clock = FakeClock()
    with Vault.open(pg_location, keyring_backend=MemoryKeyring(), clock=clock) as vault:
        every_write(vault, clock)
        puts_at_once(vault)
    assert len({pid for _, _, pid in commits}) >= 2, "only one connection of the pool was seen"
    weak = [(commit, fsync) for commit, fsync, _ in commits if commit not in DURABLE_COMMITS or fsync != "on"]
    assert len(commits) >= 10 and weak == [], "synchronous_commit, fsync"
