"""The SQLite write transaction: a COMMIT that fails is rolled back and leaves as a VaultError, and the thread's
connection is left with no transaction open (the next snapshot must not join a half-finished write), and the
writer's turn is given back (another thread's write can begin)."""

from __future__ import annotations

import threading

import pytest

from tests.storage.contract_support import OWNER
from tests.storage.sqlite.faults import OneConnection, ScriptedConnection
from vault import IntegrityError, StorageError
from vault.storage import RowKey, open_store
from vault.storage.sqlite.writers import Writers
from vault.storage.sqlite.writes import SqliteWriteTx


@pytest.fixture
def writers(tmp_path):
    made = Writers(tmp_path / "s.db")
    yield made
    made.close()


def another_thread_gets_a_turn(writers: Writers) -> bool:
    taken: list[bool] = []

    def take() -> None:
        writers.acquire()
        writers.release()
        taken.append(True)

    thread = threading.Thread(target=take)
    thread.start()
    thread.join(60)
    return taken == [True]


def test_a_failed_commit_is_rolled_back_released_and_raised_as_a_storage_error(writers):
    connection = ScriptedConnection(commit_fails=True)
    connections = OneConnection(connection)
    committed: list[bool] = []
    with pytest.raises(StorageError, match="disk is full"):
        with SqliteWriteTx(connections, False, lambda: committed.append(True), writers) as tx:
            tx.insert_chunk(RowKey(OWNER, 1), 0, b"sealed")
    assert connection.statements[-2:] == ["COMMIT", "ROLLBACK"] and not connection.in_transaction
    assert connections.uses == 0 and committed == []
    assert writers.waiting() == 0 and another_thread_gets_a_turn(writers)


def test_an_error_inside_the_block_rolls_back_and_leaves_unchanged(writers):
    connection = ScriptedConnection(commit_fails=False)
    connections = OneConnection(connection)
    with pytest.raises(KeyError):
        with SqliteWriteTx(connections, False, lambda: None, writers):
            raise KeyError("the caller's own error")
    assert connection.statements == ["BEGIN IMMEDIATE", "ROLLBACK"] and connections.uses == 0
    assert another_thread_gets_a_turn(writers)


def test_a_chunk_index_past_the_stores_limit_is_refused_before_it_lands_in_the_next_rows_chunks(tmp_path):
    directory = tmp_path / "db"
    directory.mkdir(mode=0o700)
    store = open_store(directory / "s.db")
    try:
        with pytest.raises(IntegrityError, match="chunk index out of range"):
            with store.transaction() as tx:
                tx.insert_chunk(RowKey(OWNER, 2), store.max_chunks, b"would be chunk 0 of row 3")
        with store.snapshot() as reads:
            assert list(reads.read_chunks(RowKey(OWNER, 3), 0, 0)) == []
            assert list(reads.read_chunks(RowKey(OWNER, 2), 0, store.max_chunks - 1)) == []
    finally:
        store.close()
