"""What the PostgreSQL store does to save round trips must not change what a reader sees: a row lookup reads ahead
(the owner's ledger head, a small row's chunk) only inside its REPEATABLE READ snapshot, and a write transaction
(READ COMMITTED) reads each statement afresh."""

from __future__ import annotations

import threading

import pytest

from keys import SealedLedger
from tests.storage.contract_support import OWNER, Ids, put, put_ledger
from vault.storage import open_store

pytestmark = pytest.mark.postgres
OLD, NEW = SealedLedger(1, b"", b"old tag"), SealedLedger(2, b"entry", b"new tag")


@pytest.fixture
def store(pg_schemas):
    opened = open_store(pg_schemas("store"))
    yield opened
    opened.close()


def in_thread(work) -> None:
    """Run ``work`` to its commit in another thread (another connection), while the caller's transaction is open."""
    failed: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as error:  # handed to the caller's thread
            failed.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    assert not thread.is_alive() and not failed, failed


def delete_with_ledger(store, row, ledger: SealedLedger) -> None:
    with store.transaction() as tx:
        assert tx.delete_row(row.seq, row.row_id) == row.expires_at
        tx.put_ledger(OWNER, ledger)


def test_a_snapshot_keeps_what_its_lookup_read_ahead_and_the_next_snapshot_sees_the_delete(store):
    ids = Ids()
    row = put(store, ids)
    put_ledger(store, OWNER, OLD)
    with store.snapshot() as snap:
        assert snap.find_row(row.row_id, row.seq) == row
        in_thread(lambda: delete_with_ledger(store, row, NEW))
        assert snap.ledger_head(OWNER) == (1, b"old tag")
        assert list(snap.read_chunks(row.seq, 0, 0)) == [(0, b"chunk 0")]
        assert list(snap.read_chunks(row.seq, 0, 0)) == [(0, b"chunk 0")]  # read again: the same
        assert snap.read_summary(row.seq) == b"summary"
    with store.snapshot() as snap:
        assert snap.find_row(row.row_id, row.seq) is None and snap.ledger_head(OWNER) == (2, b"new tag")
        assert list(snap.read_chunks(row.seq, 0, 0)) == []


def test_a_write_transaction_reads_the_ledger_head_and_chunks_as_committed_now(store):
    ids = Ids()
    row, other = put(store, ids), put(store, ids)
    put_ledger(store, OWNER, OLD)
    with store.transaction() as tx:
        assert tx.find_row(row.row_id, row.seq) == row
        in_thread(lambda: delete_with_ledger(store, row, NEW))
        assert tx.ledger_head(OWNER) == (2, b"new tag")
        assert list(tx.read_chunks(row.seq, 0, 0)) == []
        assert tx.find_row(other.row_id, other.seq) == other
