"""The store contract's part on the keys of expiry epochs (``keys.commitments.EpochRecords``: commitments, attempts
reserved before a key is written, tombstones, closing ended epochs), mixed into ``StoreContract``
(tests/storage/contract.py), so both stores run it."""

from __future__ import annotations

import pytest

from tests.storage.contract_support import NOW
from vault import StorageError

HOUR = 3600
E = int(NOW) // HOUR + 1  # an epoch that has not ended at NOW
ENDS = (E + 1) * HOUR


class EpochRecordsContract:
    """What keys/epochs/keys.py asks of a store; the ``store`` fixture comes from StoreContract."""

    def test_an_epochs_attempts_are_reserved_outside_transactions_and_never_reused(self, store):
        records = store.commitments
        assert records.reserve_epoch(HOUR, E, NOW, NOW - 60) == 1
        assert records.reserve_epoch(HOUR, E, NOW, NOW - 60) == 2  # a racing process gets its own attempt
        assert records.reserve_epoch(HOUR, E + 1, NOW, NOW - 60) == 1 and records.reserve_epoch(900, E, NOW, 0) == 1
        with pytest.raises(StorageError), store.transaction():
            records.reserve_epoch(HOUR, E, NOW, NOW - 60)  # it would roll back with a failed write
        assert records.epoch_pending(HOUR, E, 1) and records.epoch_pending(HOUR, E, 2)
        with pytest.raises(RuntimeError), records.locked():
            records.record_epoch_commitment(HOUR, E, 1, b"first")
            raise RuntimeError("the keyring write failed")
        assert records.epoch_commitment(HOUR, E) is None and records.epoch_pending(HOUR, E, 1)
        with records.locked():
            records.record_epoch_commitment(HOUR, E, 1, b"first")
        records.record_epoch_commitment(HOUR, E, 2, b"second")  # an epoch holds one key: the first stays
        assert records.epoch_commitment(HOUR, E) == (1, b"first") and not records.epoch_pending(HOUR, E, 1)
        records.tombstone_epoch_attempt(HOUR, E, 2)  # the race's loser
        assert not records.epoch_pending(HOUR, E, 2) and records.epoch_commitment(HOUR, E) == (1, b"first")
        assert records.epoch_tombstones(unswept_only=True) == [(HOUR, E, 2, False)]
        assert records.reserve_epoch(HOUR, E, NOW, NOW - 60) == 3
        assert records.live_epochs() == [(HOUR, E)]

    def test_an_epoch_reservation_left_without_a_commitment_is_tombstoned_once_old(self, store):
        records = store.commitments
        assert records.reserve_epoch(HOUR, E, NOW, NOW - 60) == 1
        assert records.reserve_epoch(HOUR, E + 1, NOW + 10, NOW - 60) == 1  # the first is young: still pending
        assert records.epoch_pending(HOUR, E, 1)
        records.record_epoch_commitment(HOUR, E + 1, 1, b"key")
        # no allowance left: every reservation made before now without a commitment is abandoned (by the server's
        # clock on PostgreSQL, by the caller's on SQLite)
        assert records.reserve_epoch(HOUR, E + 2, NOW + 100, NOW + 100) == 1
        assert not records.epoch_pending(HOUR, E, 1) and records.epoch_commitment(HOUR, E + 1) == (1, b"key")
        assert records.epoch_tombstones(unswept_only=True) == [(HOUR, E, 1, False)]

    def test_closing_ended_epochs_tombstones_their_keys_and_attempts_and_they_never_come_back(self, store):
        records = store.commitments
        for epoch in (E, E + 1):
            assert records.reserve_epoch(HOUR, epoch, NOW, NOW - 60) == 1
            records.record_epoch_commitment(HOUR, epoch, 1, b"key %d" % epoch)
        assert records.reserve_epoch(HOUR, E, NOW, NOW - 60) == 2  # pending when its epoch is closed
        assert records.close_epochs(ENDS - 1) == []  # the epoch has not ended by then
        assert records.close_epochs(ENDS) == [(HOUR, E)]  # it ends exactly there
        assert records.epoch_commitment(HOUR, E) is None and records.live_epochs() == [(HOUR, E + 1)]
        assert records.epoch_tombstones(unswept_only=True) == [(HOUR, E, 1, False), (HOUR, E, 2, False)]
        assert not records.epoch_pending(HOUR, E, 2)
        assert records.reserve_epoch(HOUR, E, NOW, NOW - 60) is None  # closed: never another key
        records.record_epoch_commitment(HOUR, E, 3, b"late")  # a writer that ignored all that records nothing live
        assert records.epoch_commitment(HOUR, E) is None
        records.mark_epochs_swept([(HOUR, E, 1)])
        assert records.epoch_tombstones(unswept_only=True) == [(HOUR, E, 2, False)]
        assert records.epoch_tombstones(unswept_only=False)[0] == (HOUR, E, 1, True)
        assert records.close_epochs(ENDS) == [] and records.epoch_commitment(HOUR, E + 1) == (1, b"key %d" % (E + 1))

    def test_an_epoch_with_only_a_reservation_is_closed_too(self, store):
        records = store.commitments
        assert records.reserve_epoch(HOUR, E, NOW, NOW - 60) == 1
        assert records.close_epochs(ENDS) == []  # no key was destroyed
        assert records.reserve_epoch(HOUR, E, NOW, NOW - 60) is None
        assert records.epoch_tombstones(unswept_only=True) == [(HOUR, E, 1, False)]

    def test_epochs_of_different_lengths_are_apart(self, store):
        records = store.commitments
        for length, epoch in ((HOUR, E), (900, E * 4)):
            assert records.reserve_epoch(length, epoch, NOW, NOW - 60) == 1
            records.record_epoch_commitment(length, epoch, 1, b"%d" % length)
        assert records.epoch_commitment(900, E * 4) == (1, b"900") and records.epoch_commitment(HOUR, E) == (1, b"3600")
        assert records.close_epochs((E * 4 + 1) * 900) == [(900, E * 4)]
        assert records.live_epochs() == [(HOUR, E)]

    def test_closing_makes_every_tombstone_it_writes_unswept_even_one_already_marked_swept(self, store):
        records = store.commitments
        assert records.reserve_epoch(HOUR, E, NOW, NOW - 60) == 1
        records.record_epoch_commitment(HOUR, E, 1, b"key")
        records.tombstone_epoch_attempt(HOUR, E + 1, 4)
        records.mark_epochs_swept([(HOUR, E + 1, 4)])
        records.tombstone_epoch_attempt(HOUR, E + 1, 4)  # tombstoned again: its entry is looked for again
        assert records.epoch_tombstones(unswept_only=True) == [(HOUR, E + 1, 4, False)]
        records.mark_epochs_swept([(HOUR, E + 1, 4)])
        assert records.recorded_attempt(HOUR, E) == 1 and records.epoch_commitment(HOUR, E) == (1, b"key")
        assert records.close_epochs(ENDS) == [(HOUR, E)]
        assert records.epoch_tombstones(unswept_only=True) == [(HOUR, E, 1, False)]
        assert records.recorded_attempt(HOUR, E) is None

    def test_what_destruction_probes_for_the_oldest_epoch_and_the_entries_found_unlisted(self, store):
        records = store.commitments
        assert records.oldest_epoch(HOUR) is None
        assert records.reserve_epoch(HOUR, E + 2, NOW, NOW - 60) == 1
        records.record_epoch_commitment(HOUR, E + 2, 1, b"key")
        assert records.reserve_epoch(HOUR, E + 3, NOW, NOW - 60) == 1
        records.tombstone_epoch_attempt(HOUR, E + 4, 2)
        assert records.oldest_epoch(HOUR) == E + 2 and records.oldest_epoch(900) is None
        records.close_found([(HOUR, E, 3)])  # an entry the database did not list: tombstoned, its epoch closed
        assert records.epoch_tombstones(unswept_only=True) == [(HOUR, E, 3, False), (HOUR, E + 4, 2, False)]
        assert records.reserve_epoch(HOUR, E, NOW, NOW - 60) is None and records.bad_epoch_rows() == 0
