"""The store contract's part on deleting: rows, expired rows and an owner's rows in batches, the owners' ledgers
of deleted rows and the lookup of the rows they name, mixed into ``StoreContract`` (tests/storage/contract.py)."""

from __future__ import annotations

import dataclasses
import os

import pytest

from keys import SealedLedger
from tests.storage.contract_support import NOW, OTHER_OWNER, OWNER, put, put_ledger


class DeletesContract:
    """Deletes and ledgers; the ``store``, ``ids`` and ``small_batches`` fixtures come from StoreContract."""

    # -- deletes ----------------------------------------------------------------------------------------------------
    def test_delete_row_removes_row_summary_and_chunks_and_refuses_a_stale_id(self, store, ids):
        row, other = put(store, ids, chunks=(b"a", b"b")), put(store, ids)
        with store.transaction() as tx:
            # the seq's row does not store this id
            assert tx.delete_row(dataclasses.replace(row, seq=other.seq)) is None
            assert tx.delete_row(row) == row.expires_at  # the expiry its ledger entry records
            assert tx.delete_row(row) is None
        with pytest.raises(RuntimeError), store.transaction() as tx:
            assert tx.delete_row(other) == other.expires_at
            raise RuntimeError("the ledger could not be written")  # the delete rolls back with it
        with store.snapshot() as snap:
            assert snap.find_row(row.owner_tag, row.row_id, row.seq) is None and snap.read_summary(row) is None
            assert list(snap.read_chunks(row, 0, 9)) == []
            assert snap.find_row(other.owner_tag, other.row_id, other.seq) == other

    def test_delete_expired_works_in_batches_and_reports_running_totals(self, store, ids, small_batches):
        expired = [put(store, ids, owner=(OWNER, OTHER_OWNER)[n % 2], expires=NOW) for n in range(5)]
        live = put(store, ids)
        totals: list[int] = []
        assert store.delete_expired(NOW, totals.append) == 5
        assert totals == [*range(small_batches, 5, small_batches), 5]
        with store.snapshot() as snap:
            assert [snap.find_row(row.owner_tag, row.row_id, row.seq) for row in expired] == [None] * 5
            assert snap.find_row(live.owner_tag, live.row_id, live.seq) == live

    def test_delete_owner_rows_works_in_batches_and_reports_running_totals(self, store, ids, small_batches):
        for expires in (NOW - 1, NOW + 60, NOW + 60, NOW + 60, NOW + 60):  # expired or not, all of them
            put(store, ids, expires=expires)
        other = put(store, ids, owner=OTHER_OWNER)
        totals: list[int] = []
        assert store.delete_owner_rows(OWNER, totals.append) == 5
        assert totals == [*range(small_batches, 5, small_batches), 5]
        with store.snapshot() as snap:
            assert not snap.owner_has_rows(OWNER) and snap.find_row(other.owner_tag, other.row_id, other.seq) == other

    # -- deletion ledgers -------------------------------------------------------------------------------------------
    def test_a_ledger_is_stored_replaced_and_read_whole_by_its_head_or_all_together(self, store):
        first, second = SealedLedger(1, b"entry" * 5, b"tag one"), SealedLedger(2, b"", b"tag two")
        with store.snapshot() as snap:
            assert snap.ledger(OWNER) is None and snap.ledger_head(OWNER) is None and snap.ledgers() == []
        put_ledger(store, OWNER, first)
        put_ledger(store, OTHER_OWNER, second)
        with store.snapshot() as snap:
            assert snap.ledger(OWNER) == first and snap.ledger_head(OWNER) == (1, b"tag one")
            assert sorted(snap.ledgers()) == sorted([(OWNER, first), (OTHER_OWNER, second)])
        put_ledger(store, OWNER, second)
        with store.snapshot() as snap:
            assert snap.ledger(OWNER) == second and snap.ledger(OTHER_OWNER) == second and len(snap.ledgers()) == 2

    def test_a_ledger_written_with_a_delete_rolls_back_with_it(self, store, ids):
        row = put(store, ids)
        put_ledger(store, OWNER, SealedLedger(1, b"", b"kept"))
        with pytest.raises(RuntimeError), store.transaction() as tx:
            assert tx.delete_row(row) == row.expires_at
            tx.put_ledger(OWNER, SealedLedger(2, row.row_id, b"lost"))
            assert tx.ledger(OWNER) == SealedLedger(2, row.row_id, b"lost")  # the transaction reads its own write
            raise RuntimeError("the delete failed half-way")
        with store.snapshot() as snap:
            assert snap.ledger(OWNER) == SealedLedger(1, b"", b"kept")
            assert snap.find_row(row.owner_tag, row.row_id, row.seq) == row

    def test_find_rows_finds_in_one_call_what_find_row_finds_of_each(self, store, ids, small_batches):
        """gc's lookup of the rows a ledger names: each (id, seq) found only where find_row finds it, in the order
        asked, across batches (``small_batches`` shrinks a store's batches of bound ids too)."""
        rows = [put(store, ids, owner=(OWNER, OTHER_OWNER)[n % 2]) for n in range(3)]
        asked = [(rows[2].row_id, rows[2].seq), (os.urandom(16), rows[0].seq),  # another id naming a row's seq
                 (rows[1].row_id, rows[2].seq), (rows[1].row_id, rows[2].seq + 9), (rows[0].row_id, rows[0].seq)]
        asked += [(rows[1].row_id, seq) for seq in (0, -1, 2**64, str(rows[1].seq))]  # no seq a row can have
        with store.snapshot() as snap:
            assert snap.find_rows(OWNER, asked) == [rows[2], rows[0]]
            one_by_one = [snap.find_row(OWNER, *each) for each in asked]
            assert snap.find_rows(OWNER, asked) == [row for row in one_by_one if row]
            assert snap.find_rows(OTHER_OWNER, asked) == []  # its one row is asked at another's seqs
            assert snap.find_rows(OTHER_OWNER, [(rows[1].row_id, rows[1].seq), asked[0]]) == [rows[1]]
            assert snap.find_rows(OWNER, []) == []
