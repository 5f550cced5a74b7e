"""The store contract's part on key bookkeeping: commitments, version reservations, tombstones and the owner
registry (``keys.KeyCommitments``), mixed into ``StoreContract`` (tests/storage/contract.py)."""

from __future__ import annotations

import pytest

from tests.storage.contract_support import NOW, OTHER_OWNER, OWNER
from vault import StorageError


class KeyBookkeepingContract:
    """What the key manager asks of a store; the ``store`` and ``ids`` fixtures come from StoreContract."""

    # -- key commitments --------------------------------------------------------------------------------------------
    def test_owner_commitments_are_recorded_once_registered_and_forgotten(self, store):
        commitments = store.commitments
        commitments.record_owner_commitment(OWNER, 1, b"v1", b"sealed name")
        commitments.record_owner_commitment(OWNER, 1, b"another v1", b"another name")  # the first one stays
        commitments.record_owner_commitment(OWNER, 2, b"v2", b"sealed name")
        assert commitments.owner_commitments(OWNER) == {1: b"v1", 2: b"v2"}
        assert commitments.registered_owners() == [(OWNER, b"sealed name")]
        commitments.tombstone_owner_versions(OWNER, {1})
        assert commitments.owner_commitments(OWNER) == {2: b"v2"} and commitments.registered_owners()
        assert commitments.tombstones(OWNER, unswept_only=True) == [(OWNER, 1, False)]
        commitments.tombstone_owner_versions(OWNER, None)
        assert commitments.owner_commitments(OWNER) == {} and commitments.registered_owners() == []
        assert commitments.tombstones(None, unswept_only=False) == [(OWNER, 1, False), (OWNER, 2, False)]

    def test_key_versions_are_reserved_outside_transactions_and_never_reused(self, store):
        commitments = store.commitments
        assert commitments.reserve_owner_version(OWNER, NOW, NOW - 60) == 1
        assert commitments.version_pending(OWNER, 1)
        with pytest.raises(StorageError), store.transaction():
            commitments.reserve_owner_version(OWNER, NOW, NOW - 60)  # it would roll back with a failed write
        with pytest.raises(RuntimeError), store.transaction():
            commitments.record_owner_commitment(OWNER, 1, b"v1", b"name")
            raise RuntimeError("the keyring write failed")
        assert commitments.version_pending(OWNER, 1)  # the reservation outlived the failed transaction
        commitments.record_owner_commitment(OWNER, 1, b"v1", b"name")
        assert not commitments.version_pending(OWNER, 1)
        assert commitments.reserve_owner_version(OWNER, NOW, NOW - 60) == 2
        assert commitments.reserve_owner_version(OTHER_OWNER, NOW, NOW - 60) == 1
        commitments.tombstone_owner_versions(OWNER, None)  # a shred: every version, reserved or committed
        assert [v for _, v, _ in commitments.tombstones(OWNER, unswept_only=True)] == [1, 2]
        assert not commitments.version_pending(OWNER, 2)
        assert commitments.reserve_owner_version(OWNER, NOW, NOW - 60) == 3  # after a shred too
        commitments.mark_swept(OWNER, [1])
        assert [v for _, v, _ in commitments.tombstones(OWNER, unswept_only=True)] == [2]
        assert commitments.tombstones(OWNER, unswept_only=False)[0] == (OWNER, 1, True)

    def test_a_reservation_left_without_a_commitment_is_tombstoned_once_old(self, store):
        commitments = store.commitments
        assert commitments.reserve_owner_version(OWNER, NOW, NOW - 60) == 1
        assert commitments.reserve_owner_version(OWNER, NOW + 10, NOW - 60) == 2  # 1 is young: still pending
        assert commitments.version_pending(OWNER, 1)
        commitments.record_owner_commitment(OWNER, 2, b"v2", b"name")
        # no allowance left: every reservation made before now without a commitment is abandoned (by the server's
        # clock on PostgreSQL, by the caller's on SQLite)
        assert commitments.reserve_owner_version(OWNER, NOW + 100, NOW + 100) == 3
        assert not commitments.version_pending(OWNER, 1) and commitments.owner_commitments(OWNER) == {2: b"v2"}
        assert [v for _, v, _ in commitments.tombstones(OWNER, unswept_only=True)] == [1]

    def test_key_versions_in_use_count_an_owners_rows_expired_included(self, store, ids):
        from tests.storage.contract import put

        for version, expires in ((1, NOW - 1), (1, NOW + 60), (3, NOW + 60)):
            put(store, ids, version=version, expires=expires)
        put(store, ids, owner=OTHER_OWNER, version=2)
        assert store.commitments.key_versions_in_use(OWNER) == {1: 2, 3: 1}

    def test_the_index_commitment_is_recorded_once(self, store):
        assert store.commitments.index_commitment() is None
        store.commitments.record_index_commitment(b"index")
        store.commitments.record_index_commitment(b"another index")
        assert store.commitments.index_commitment() == b"index"

    def test_commitments_written_in_a_transaction_roll_back_and_commit_with_it(self, store):
        commitments = store.commitments
        commitments.record_owner_commitment(OTHER_OWNER, 1, b"kept", b"name")
        with pytest.raises(RuntimeError), store.transaction() as tx:
            commitments.record_owner_commitment(OWNER, 1, b"v1", b"name")
            commitments.record_index_commitment(b"index")
            commitments.tombstone_owner_versions(OTHER_OWNER, None)
            assert tx.next_seq_and_commitments(OWNER, 1)[1] == b"v1"  # joined this transaction
            raise RuntimeError("the keyring write failed")
        assert commitments.owner_commitments(OWNER) == {} and commitments.index_commitment() is None
        assert commitments.owner_commitments(OTHER_OWNER) == {1: b"kept"}
        with store.transaction():
            commitments.record_owner_commitment(OWNER, 1, b"v1", b"name")
        assert commitments.owner_commitments(OWNER) == {1: b"v1"}
