"""The store contract (vault/storage/base.py) as tests: any store runs them by subclassing StoreContract and
supplying three fixtures: ``make_store``, a factory ``make_store(name="store")`` that opens the store called ``name``
in a private place of the test's own (a new name is a new, empty store; the same name opens it again), and
``small_batches``, which makes the batched deletes (and row lookups) work in batches of a few rows and returns
that size, and ``plant``, the database's writer (contract_attacks.py).

Everything goes through the protocols: no driver, no SQL, no table names. Row ids are any 16 bytes the test makes
up; ``Ids.row_seqs`` says which seq each names, as the index key does for the vault.
"""

from __future__ import annotations

import os
import threading

import pytest

from keys import SealedLedger
from tests.storage.contract_attacks import BookkeepingAttacksContract
from tests.storage.contract_deletes import DeletesContract
from tests.storage.contract_epochs import EpochRecordsContract
from tests.storage.contract_keys import KeyBookkeepingContract
from tests.storage.contract_support import NOW, OTHER_OWNER, OTHER_TURN, OWNER, TURN, Ids, put, put_ledger
from vault import IntegrityError, StorageError, VaultError
from vault.storage import RowKey, StoredRow

EPOCH_WRAPPED = b"\x03" + bytes(64)  # the size and first byte of a format 3 wrapped key (keys/formats/v3.py)


class StoreContract(KeyBookkeepingContract, DeletesContract, EpochRecordsContract, BookkeepingAttacksContract):
    """What the vault asks of a store. Subclasses supply ``make_store`` and ``small_batches``."""

    @pytest.fixture
    def make_store(self):
        raise NotImplementedError("a store's suite supplies make_store(name='store')")

    @pytest.fixture
    def small_batches(self) -> int:
        raise NotImplementedError("a store's suite supplies small_batches")

    @pytest.fixture
    def store(self, make_store):
        store = make_store()
        yield store
        store.close()

    @pytest.fixture
    def ids(self) -> Ids:
        return Ids()

    # -- transactions and snapshots ---------------------------------------------------------------------------------
    def test_a_transaction_that_raises_rolls_back_everything_it_wrote(self, store, ids):
        kept = put(store, ids)
        with pytest.raises(RuntimeError), store.transaction() as tx:
            seq, _, _ = tx.next_seq_and_commitments(OWNER, 1)
            lost = ids.new(seq)
            tx.insert_chunk(RowKey(OWNER, seq), 0, b"lost")
            tx.insert_row(StoredRow(seq, lost, OWNER, TURN, 1, NOW + 60, 1, b"w", b"m"), b"lost")
            tx.update_expiry(kept, NOW + 999, b"new wrapped", b"new metadata", b"new summary")
            tx.put_meta("vault_id", b"lost")
            raise RuntimeError("the put failed half-way")
        with store.snapshot() as snap:
            assert snap.find_row(OWNER, lost, seq) is None
            assert list(snap.read_chunks(RowKey(OWNER, seq), 0, 0)) == []
            assert snap.read_summary(RowKey(OWNER, seq)) is None
            assert snap.find_row(kept.owner_tag, kept.row_id, kept.seq) == kept
            assert snap.read_summary(kept) == b"summary"
        assert store.get_meta("vault_id") is None

    def test_a_commit_is_seen_by_the_next_snapshot_and_by_a_reopened_store(self, store, ids, make_store):
        row = put(store, ids)
        with store.snapshot() as snap:
            assert snap.find_row(row.owner_tag, row.row_id, row.seq) == row
        again = make_store()
        try:
            with again.snapshot() as snap:
                assert snap.find_row(row.owner_tag, row.row_id, row.seq) == row
        finally:
            again.close()

    def test_a_snapshot_sees_one_state_while_another_thread_commits(self, store, ids):
        first = put(store, ids)
        done: list[StoredRow] = []
        with store.snapshot() as snap:
            assert snap.find_row(first.owner_tag, first.row_id, first.seq) == first
            writer = threading.Thread(target=lambda: done.append(put(store, ids, summary=b"second")))
            writer.start()
            writer.join(30)
            (second,) = done
            assert snap.find_row(second.owner_tag, second.row_id, second.seq) is None
            assert snap.read_summary(second) is None
        with store.snapshot() as snap:
            assert snap.find_row(second.owner_tag, second.row_id, second.seq) == second

    def test_a_transaction_reads_its_own_writes_and_a_snapshot_inside_it_is_that_transaction(self, store, ids):
        with store.transaction() as tx:
            seq, _, _ = tx.next_seq_and_commitments(OWNER, 1)
            row = StoredRow(seq, ids.new(seq), OWNER, TURN, 1, NOW + 60, 1, b"w", b"m")
            tx.insert_row(row, b"s")
            assert tx.find_row(row.owner_tag, row.row_id, seq) == row
            with store.snapshot() as snap:
                assert snap.find_row(row.owner_tag, row.row_id, seq) == row

    def test_next_seq_and_commitments_hands_out_increasing_seqs_each_once_even_to_racing_threads(self, store, ids):
        first, second = put(store, ids), put(store, ids)
        assert 0 < first.seq < second.seq
        handed: list[list[int]] = [[] for _ in range(4)]
        threads = [threading.Thread(target=lambda mine=mine: mine.extend(put(store, ids).seq for _ in range(10)))
                   for mine in handed]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        seqs = [seq for mine in handed for seq in mine]
        assert len(seqs) == len(set(seqs)) == 40 and min(seqs) > second.seq
        assert all(mine == sorted(mine) for mine in handed)

    def test_next_seq_and_commitments_reads_the_commitment_of_the_version_that_will_wrap(self, store):
        store.commitments.record_owner_commitment(OWNER, 2, b"commitment v2", b"name")
        with store.transaction() as tx:
            assert tx.next_seq_and_commitments(OWNER, 2)[1] == b"commitment v2"
            assert tx.next_seq_and_commitments(OWNER, 1)[1] is None
            assert tx.next_seq_and_commitments(OTHER_OWNER, 2)[1] is None

    # -- rows -----------------------------------------------------------------------------------------------------
    def test_find_row_needs_the_very_id_stored_at_a_valid_seq_by_its_owner(self, store, ids):
        row = put(store, ids)
        with store.snapshot() as snap:
            assert snap.find_row(row.owner_tag, row.row_id, row.seq) == row
            assert snap.find_row(OTHER_OWNER, row.row_id, row.seq) is None  # the owner is part of the lookup
            assert snap.find_row(OWNER, os.urandom(16), row.seq) is None  # another id naming this seq
            for seq in (0, -1, row.seq + 1, 2**64, str(row.seq)):  # no row there, or no seq a row can have
                assert snap.find_row(row.owner_tag, row.row_id, seq) is None

    def test_read_chunks_gives_a_range_in_order_and_can_be_closed_midway(self, store, ids):
        row = put(store, ids, chunks=tuple(b"chunk %d" % i for i in range(5)))
        neighbour = put(store, ids, chunks=(b"neighbour",))
        with store.snapshot() as snap:
            assert list(snap.read_chunks(row, 1, 3)) == [(i, b"chunk %d" % i) for i in (1, 2, 3)]
            assert list(snap.read_chunks(row, 3, 9)) == [(3, b"chunk 3"), (4, b"chunk 4")]
            assert list(snap.read_chunks(neighbour, 0, 9)) == [(0, b"neighbour")]
            reading = snap.read_chunks(row, 0, 4)
            assert next(reading) == (0, b"chunk 0")
            reading.close()
        put(store, ids)  # nothing of the closed read holds the store

    def test_read_summary_and_wrapped_key_of_a_row(self, store, ids):
        row = put(store, ids, summary=b"the summary")
        with store.snapshot() as snap:
            assert snap.read_summary(row) == b"the summary"
            assert snap.read_summary(RowKey(row.owner_tag, row.seq + 1)) is None
            assert snap.wrapped_key(row.owner_tag, row.seq) == b"wrapped key"

    def test_list_turn_gives_one_owners_unexpired_rows_of_one_turn_with_summaries(self, store, ids):
        live = put(store, ids, summary=b"live")
        put(store, ids, expires=NOW)  # expired at NOW
        put(store, ids, turn=OTHER_TURN)
        put(store, ids, owner=OTHER_OWNER)
        with store.snapshot() as snap:
            assert snap.list_turn(OWNER, TURN, NOW) == [(live, b"live")]

    def test_list_turn_summaries_lists_a_turn_oldest_first_without_expired_rows(self, store, ids):
        rows = [put(store, ids, expires=NOW + 60 + n, summary=b"summary %d" % n) for n in range(3)]
        put(store, ids, expires=NOW)  # expired at NOW
        put(store, ids, owner=OTHER_OWNER)
        with store.snapshot() as snap:
            assert snap.list_turn_summaries(OWNER, TURN, NOW, ids.row_seqs) == [
                (row.seq, row.row_id, 1, row.expires_at, 7, b"summary %d" % n) for n, row in enumerate(rows)]

    def test_list_turn_summaries_refuses_a_row_whose_id_names_another_seq(self, store, ids):
        row = put(store, ids)
        ids.seqs[row.row_id] = row.seq + 5  # moved or copied: its id reaches no row here
        with store.snapshot() as snap, pytest.raises(IntegrityError):
            snap.list_turn_summaries(OWNER, TURN, NOW, ids.row_seqs)

    def test_expiring_gives_every_owners_rows_live_at_one_time_and_expired_by_another(self, store, ids):
        rows = {expires: put(store, ids, owner=(OWNER, OTHER_OWNER)[n % 2], expires=expires)
                for n, expires in enumerate((NOW - 1, NOW, NOW + 1, NOW + 60, NOW + 61))}
        with store.snapshot() as snap:
            assert sorted(snap.expiring(NOW, NOW + 60), key=lambda row: row.seq) == [rows[NOW + 1], rows[NOW + 60]]
            assert snap.expiring(NOW + 61, NOW + 99) == []

    def test_turn_has_rows_counts_unexpired_rows_and_owner_has_rows_any(self, store, ids):
        put(store, ids, expires=NOW)
        with store.snapshot() as snap:
            assert not snap.turn_has_rows(OWNER, TURN, NOW) and snap.turn_has_rows(OWNER, TURN, NOW - 1)
            assert snap.owner_has_rows(OWNER) and not snap.owner_has_rows(OTHER_OWNER)

    def test_update_expiry_stores_the_new_expiry_wrapped_key_metadata_and_summary(self, store, ids):
        row = put(store, ids)
        with store.transaction() as tx:
            tx.update_expiry(row, NOW + 3600, b"new wrapped", b"new metadata", b"new summary")
        with store.snapshot() as snap:
            found = snap.find_row(row.owner_tag, row.row_id, row.seq)
            assert (found.expires_at, found.wrapped_key, found.metadata, snap.read_summary(row)) == (
                NOW + 3600, b"new wrapped", b"new metadata", b"new summary")

    def test_update_wrapped_key_leaves_the_summary_when_given_none(self, store, ids):
        row = put(store, ids)
        with store.transaction() as tx:
            tx.update_wrapped_key(row, 2, b"rewrapped", None)
        with store.snapshot() as snap:
            found = snap.find_row(row.owner_tag, row.row_id, row.seq)
            assert (found.key_version, found.wrapped_key, snap.read_summary(row)) == (2, b"rewrapped", b"summary")
        with store.transaction() as tx:
            tx.update_wrapped_key(row, 3, b"again", b"resealed")
        with store.snapshot() as snap:
            assert snap.read_summary(row) == b"resealed" and snap.wrapped_key(row.owner_tag, row.seq) == b"again"

    def test_rows_to_rewrap_gives_an_owners_rows_under_other_versions_or_no_epoch_up_to_a_limit(self, store, ids):
        old = [put(store, ids, summary=b"old %d" % n, wrapped=EPOCH_WRAPPED) for n in range(3)]
        no_epoch = put(store, ids, version=2, summary=b"no epoch", wrapped=b"\x03" + bytes(59))  # format 1: 60 bytes
        put(store, ids, version=2, wrapped=EPOCH_WRAPPED)
        put(store, ids, owner=OTHER_OWNER)
        with store.transaction() as tx:
            assert len(tx.rows_to_rewrap(OWNER, 2, 2)) == 2
            assert sorted(tx.rows_to_rewrap(OWNER, 2, 10), key=lambda found: found[0].seq) == [
                *((row, b"old %d" % n) for n, row in enumerate(old)), (no_epoch, b"no epoch")]

    def test_meta_is_put_once_and_read_back(self, store):
        assert store.get_meta("vault_id") is None
        with store.transaction() as tx:
            tx.put_meta("vault_id", b"the vault")
        assert store.get_meta("vault_id") == b"the vault"
        with pytest.raises(VaultError), store.transaction() as tx:
            tx.put_meta("vault_id", b"another")
        assert store.get_meta("vault_id") == b"the vault"

    def test_is_empty_until_a_row_or_a_key_commitment_exists(self, make_store, ids):
        uses = {"a_row": lambda s: put(s, ids),
                "an_owner_commitment": lambda s: s.commitments.record_owner_commitment(OWNER, 1, b"c", b"name"),
                "the_index_commitment": lambda s: s.commitments.record_index_commitment(b"index"),
                "a_deletion_ledger": lambda s: put_ledger(s, OWNER, SealedLedger(1, b"", b"tag"))}
        for name, use in uses.items():
            store = make_store(name)
            try:
                with store.transaction() as tx:
                    tx.put_meta("vault_id", b"the vault")  # a vault id alone orphans nothing
                assert store.is_empty(), name
                use(store)
                assert not store.is_empty(), name
            finally:
                store.close()

    # -- the store as a whole ---------------------------------------------------------------------------------------
    def test_stats_counts_rows_bytes_expired_rows_and_rows_by_version(self, store, ids):
        put(store, ids, expires=NOW)
        put(store, ids, version=2)
        stats = store.stats(NOW)
        disk = stats.pop("disk")
        assert stats == {"rows": 2, "bytes": 14, "expired_rows": 1,
                         "by_key_version": {1: {"rows": 1, "bytes": 7}, 2: {"rows": 1, "bytes": 7}}}
        assert sorted(disk) == ["ballast_bytes", "file_system_bytes", "free_bytes", "reserve_bytes"]
        # a store that cannot see its disk (a server's) says None for both sizes, never a made-up number
        assert all(value is None or (type(value) is int and value >= 0) for value in disk.values())
        assert (disk["free_bytes"] is None) == (disk["file_system_bytes"] is None)
        if disk["free_bytes"] is not None:
            assert disk["free_bytes"] <= disk["file_system_bytes"]

    def test_owner_usage_counts_an_owners_stored_rows_and_bytes_expired_included(self, store, ids):
        with store.transaction() as tx:
            assert tx.owner_usage(OWNER) == (0, 0)
        gone = put(store, ids, expires=NOW - 1)
        put(store, ids)
        put(store, ids, owner=OTHER_OWNER)
        with store.transaction() as tx:
            assert tx.owner_usage(OWNER) == (2, 14) and tx.owner_usage(OTHER_OWNER) == (1, 7)
        with store.transaction() as tx:
            assert tx.delete_row(gone) == NOW - 1
        with store.transaction() as tx:
            assert tx.owner_usage(OWNER) == (1, 7)

    def test_check_space_passes_where_the_store_has_room(self, store, ids):
        store.check_space(0)
        store.check_space(1 << 20)
        put(store, ids)

    def test_max_chunks_is_a_positive_int(self, store):
        assert type(store.max_chunks) is int and store.max_chunks > 0

    def test_after_scrub_and_close_every_call_is_a_storage_error(self, store, ids):
        put(store, ids)
        store.scrub()
        store.close()
        for call in (store.snapshot().__enter__, store.transaction().__enter__, lambda: store.get_meta("vault_id"),
                     store.is_empty, lambda: store.stats(NOW), lambda: store.delete_owner_rows(OWNER),
                     lambda: store.delete_expired(NOW), lambda: store.commitments.owner_commitments(OWNER)):
            with pytest.raises(StorageError):
                call()
