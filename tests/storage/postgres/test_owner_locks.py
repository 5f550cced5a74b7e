"""What replaces the SQLite store's one writer lock on PostgreSQL: writers of different owners run side by side,
writers of one owner queue, and a shred or retirement conflicts with a put holding the key it destroys."""

from __future__ import annotations

import threading

import pytest

from tests.storage.contract_support import NOW, OTHER_OWNER, OWNER, TURN, Ids, put
from vault.storage import RowKey, StoredRow, open_store

pytestmark = pytest.mark.postgres
WAIT = 0.5  # how long a writer that should be blocked is watched; one that should not is given 20 s


@pytest.fixture
def store(pg_schemas):
    store = open_store(pg_schemas("locks"), pool_size=4)
    yield store
    store.close()


def in_thread(work) -> tuple[threading.Thread, threading.Event, list]:
    done, errors = threading.Event(), []

    def run() -> None:
        try:
            work()
        except BaseException as error:  # reported by the test
            errors.append(error)
        done.set()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, done, errors


def record_key(store, owner: bytes, version: int = 1) -> None:
    store.commitments.record_owner_commitment(owner, version, b"check", b"sealed name")


def test_a_writer_of_another_owner_never_waits_for_an_open_put(store):
    ids = Ids()
    with store.transaction() as tx:
        tx.next_seq_and_commitments(OWNER, 1)  # the owner's lock held, uncommitted
        thread, done, errors = in_thread(lambda: put(store, ids, owner=OTHER_OWNER))
        assert done.wait(20) and errors == []  # committed while the first put is still open
    thread.join()


def test_writers_of_one_owner_queue_behind_each_other(store):
    ids = Ids()
    with store.transaction() as tx:
        tx.next_seq_and_commitments(OWNER, 1)
        thread, done, errors = in_thread(lambda: put(store, ids, owner=OWNER))
        assert not done.wait(WAIT)  # waits for the owner's lock
    assert done.wait(20) and errors == []
    thread.join()


def test_a_shred_waits_for_a_put_holding_the_key_and_a_later_put_sees_it_gone(store):
    record_key(store, OWNER)
    ids = Ids()
    with store.transaction() as tx:
        seq, commitment, _ = tx.next_seq_and_commitments(OWNER, 1)
        assert commitment == b"check"
        thread, done, errors = in_thread(lambda: store.commitments.tombstone_owner_versions(OWNER, None))
        assert not done.wait(WAIT)  # the put holds the owner's lock and the key's row FOR SHARE (either suffices)
        row = StoredRow(seq, ids.new(seq), OWNER, TURN, 1, NOW + 60, 1, b"w", b"m")
        tx.insert_chunk(RowKey(OWNER, seq), 0, b"c")
        tx.insert_row(row, b"s")
    assert done.wait(20) and errors == []
    thread.join()
    with store.transaction() as tx:
        # the next put finds no commitment: it reloads, never wraps
        assert tx.next_seq_and_commitments(OWNER, 1)[1] is None


def test_a_retirement_counts_rows_only_after_the_owners_puts_in_flight_commit(store):
    record_key(store, OWNER)
    ids = Ids()
    counted: list[dict] = []

    def retire() -> None:
        with store.transaction():
            counted.append(store.commitments.key_versions_in_use(OWNER))

    with store.transaction() as tx:
        seq, _, _ = tx.next_seq_and_commitments(OWNER, 1)
        thread, done, errors = in_thread(retire)
        assert not done.wait(WAIT)
        tx.insert_chunk(RowKey(OWNER, seq), 0, b"c")
        tx.insert_row(StoredRow(seq, ids.new(seq), OWNER, TURN, 1, NOW + 60, 1, b"w", b"m"), b"s")
    assert done.wait(20) and errors == []
    thread.join()
    assert counted == [{1: 1}]  # the row the put committed is counted: version 1 cannot be retired under it
