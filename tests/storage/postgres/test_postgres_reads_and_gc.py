"""What the PostgreSQL store does to save round trips must not change what a reader or a collector sees: a row
lookup reads ahead (the owner's ledger head, a small row's chunk) only inside its REPEATABLE READ snapshot, a
write transaction (READ COMMITTED) reads each statement afresh, and gc's one-statement batches skip rows another
transaction holds, never wait for them, and reach every expired row past live ones; queued updates keep the order
in which the transaction made them and are seen by its next statement."""

from __future__ import annotations

import threading
import time

import pytest

from keys import SealedLedger
from tests.storage.contract_support import NOW, OWNER, TURN, Ids, put, put_ledger
from vault.storage import StoredRow, open_store
from vault.storage.postgres import store as postgres_store

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
        assert tx.delete_row(row) == row.expires_at
        tx.put_ledger(OWNER, ledger)


def test_a_snapshot_keeps_what_its_lookup_read_ahead_and_the_next_snapshot_sees_the_delete(store):
    ids = Ids()
    row = put(store, ids)
    put_ledger(store, OWNER, OLD)
    with store.snapshot() as snap:
        assert snap.find_row(row.owner_tag, row.row_id, row.seq) == row
        in_thread(lambda: delete_with_ledger(store, row, NEW))
        assert snap.ledger_head(OWNER) == (1, b"old tag")
        assert list(snap.read_chunks(row, 0, 0)) == [(0, b"chunk 0")]
        assert list(snap.read_chunks(row, 0, 0)) == [(0, b"chunk 0")]  # read again: the same
        assert snap.read_summary(row) == b"summary"
    with store.snapshot() as snap:
        assert snap.find_row(row.owner_tag, row.row_id, row.seq) is None and snap.ledger_head(OWNER) == (2, b"new tag")
        assert list(snap.read_chunks(row, 0, 0)) == []


def test_a_write_transaction_reads_the_ledger_head_and_chunks_as_committed_now(store):
    ids = Ids()
    row, other = put(store, ids), put(store, ids)
    put_ledger(store, OWNER, OLD)
    with store.transaction() as tx:
        assert tx.find_row(row.owner_tag, row.row_id, row.seq) == row
        in_thread(lambda: delete_with_ledger(store, row, NEW))
        assert tx.ledger_head(OWNER) == (2, b"new tag")
        assert list(tx.read_chunks(row, 0, 0)) == []
        assert tx.find_row(other.owner_tag, other.row_id, other.seq) == other


def test_gc_reaches_every_expired_row_past_live_ones_in_small_batches(store, monkeypatch):
    monkeypatch.setattr(postgres_store, "GC_BATCH", 2)
    ids = Ids()
    expired_at = (NOW, NOW + 60, NOW, NOW, NOW + 60, NOW + 60, NOW, NOW)
    rows = [put(store, ids, expires=expires) for expires in expired_at]
    totals: list[int] = []
    assert store.delete_expired(NOW, totals.append) == 5
    assert totals == [2, 4, 5]
    with store.snapshot() as snap:
        found = [snap.find_row(row.owner_tag, row.row_id, row.seq) is not None for row in rows]
        assert found == [e > NOW for e in expired_at]


def test_gc_skips_a_row_another_transaction_is_deleting_and_never_waits_for_it(store):
    ids = Ids()
    rows = [put(store, ids, expires=NOW) for _ in range(5)]
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with store.transaction() as tx:
            assert tx.delete_row(rows[1]) == NOW  # locked, not yet committed
            holding.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(10)
        started = time.monotonic()
        assert store.delete_expired(NOW) == 4
        assert time.monotonic() - started < 5
    finally:
        release.set()
        holder.join(30)
    with store.snapshot() as snap:
        assert all(snap.find_row(row.owner_tag, row.row_id, row.seq) is None for row in rows)


def test_two_transactions_deleting_one_row_delete_it_once(store):
    ids = Ids()
    row = put(store, ids, chunks=(b"a", b"b"))
    results: list[float | None] = []
    deleting, release = threading.Event(), threading.Event()

    def first() -> None:
        with store.transaction() as tx:
            results.append(tx.delete_row(row))
            deleting.set()
            release.wait(10)

    holder = threading.Thread(target=first)
    holder.start()
    assert deleting.wait(10)
    threading.Timer(0.5, release.set).start()
    with store.transaction() as tx:  # waits for the first to commit, then finds the row gone
        results.append(tx.delete_row(row))
    holder.join(30)
    assert results == [NOW + 60, None]
    with store.snapshot() as snap:
        assert snap.read_summary(row) is None and list(snap.read_chunks(row, 0, 9)) == []


def test_queued_updates_keep_their_order_with_inserts_and_are_seen_by_the_next_statement(store):
    ids = Ids()
    old = put(store, ids)
    with store.transaction() as tx:
        tx.update_wrapped_key(old, 2, b"rewrapped", b"resealed")  # queued before the put's inserts
        seq, _, _ = tx.next_seq_and_commitments(OWNER, 1)
        new = StoredRow(seq, ids.new(seq), OWNER, TURN, 1, NOW + 60, 1, b"w", b"m")
        tx.insert_chunk(new, 0, b"chunk")
        tx.insert_row(new, b"summary")
        tx.update_expiry(new, NOW + 600, b"w", b"extended", b"summary 2")  # queued after them: it must find the row
        assert tx.find_row(old.owner_tag, old.row_id, old.seq).wrapped_key == b"rewrapped"
        assert tx.find_row(new.owner_tag, new.row_id, seq).metadata == b"extended"
        tx.update_expiry(old, NOW + 900, b"rewrapped", b"old extended", b"old summary 2")
    with store.snapshot() as snap:
        assert snap.find_row(new.owner_tag, new.row_id, seq).expires_at == NOW + 600
        assert snap.read_summary(new) == b"summary 2"
        found = snap.find_row(old.owner_tag, old.row_id, old.seq)
        assert (found.key_version, found.wrapped_key, found.expires_at, found.metadata) == (
            2, b"rewrapped", NOW + 900, b"old extended")
        assert snap.read_summary(old) == b"old summary 2"
