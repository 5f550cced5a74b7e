"""The making and loading of expiry epoch keys (keys/epochs/keys.py: ``get``, ``get_or_create``, ``for_put``,
``_create``, ``_start_marker``, ``_write``, ``_load``; threat_model.md, "Expiry epochs"), on a MemoryKeyring that
records each name it is asked for and a small double of the epoch records (tests/support/epoch_key_making.py):
the reservation made before the write (and how old a reservation is abandoned), the write-once entry, the
read-back check against the commitment, the attempt bound, the marker set before the first key of a length, what
is cached and what is read again, and the exact refusal of each path. A key returned that the database does not
record, or an entry written past the bound or over another, is a key destruction may never reach.
"""

from __future__ import annotations

import pytest

from keys.epochs.keys import OCCUPIED_ATTEMPTS
from keys.epochs.sweep import MAX_ATTEMPTS
from keys.errors import InvalidArgument, KeyUnavailable
from tests.support.epoch_key_making import (
    END,
    EPOCH,
    MADE_MARK,
    MARK,
    NUMBER,
    SERVICE,
    SKEW,
    START,
    TIMEOUT,
    E,
    Records,
    WatchedKeyring,
    commitment,
    name,
    scene,
    stored_key,
)

UNRECORDED = ("the database did not record an expiry epoch's new key (a row it holds for the epoch conflicts: a "
              "writer of the database); the epoch gets no key")
DESTROYED = "this expiry epoch's key was destroyed; it gets no other"


def test_a_reservation_older_than_twice_the_keyring_timeout_and_a_minute_is_abandoned():
    epochs, records, _ = scene()
    assert epochs.abandon_after == 2 * TIMEOUT + 60.0 == 70.0
    epochs.get_or_create(EPOCH, START + 100)
    assert records.reservations == [(E, NUMBER, START + 100, START + 30)]


def test_the_first_key_reserves_writes_and_records_attempt_one_and_sets_the_marker_first():
    epochs, records, ring = scene()
    key = epochs.get_or_create(EPOCH, START)
    assert records.commitments == {EPOCH: (1, commitment(key))} and records.tombstoned == []
    # the marker where a destruction now would set it: epoch 8 ended an allowance ago, epoch 9 may still be put
    assert ring.entries() == {MARK: str(NUMBER - 2), MADE_MARK: str(NUMBER), name(1): key.entry().reveal()}
    lengths = ["lengths"] * 3  # read, read back, read again: listed
    assert ring.asked == [MARK] * 4 + lengths + [MADE_MARK, MADE_MARK, name(1), name(1)] and records.locks == 1


def test_a_process_that_knows_the_marker_does_not_read_it_again_before_a_key():
    epochs, _, ring = scene()
    epochs.get_or_create(EPOCH, START)
    ring.asked.clear()
    epochs.get_or_create((E, NUMBER + 1), START)
    assert ring.asked == [MARK, MADE_MARK, MADE_MARK, name(1, NUMBER + 1), name(1, NUMBER + 1)]


def test_a_marker_already_there_is_never_raised_before_a_key_though_it_is_low():
    ring = WatchedKeyring()
    ring.secrets[(SERVICE, MARK)] = "3"  # held low by a delete the keyring keeps refusing: still to be probed
    epochs, _, ring = scene(ring=ring)
    epochs.get_or_create(EPOCH, START)
    assert ring.entries()[MARK] == "3" and ring.asked.count(MARK) == 1


def test_the_marker_is_set_to_epoch_zero_once_it_may_be_destroyed():
    epochs, _, ring = scene()
    epochs.get_or_create((E, 1), E + SKEW)
    assert ring.entries()[MARK] == "0"


def test_no_marker_is_set_before_any_epoch_may_be_destroyed():
    epochs, _, ring = scene()
    epochs.get_or_create((E, 1), E + SKEW - 1)
    assert MARK not in ring.entries() and ring.asked.count(MARK) == 1


def test_a_marker_the_keyring_fails_to_read_leaves_it_unset_and_the_key_is_made():
    ring = WatchedKeyring()
    ring.failing = {MARK}
    epochs, records, ring = scene(ring=ring)
    key = epochs.get_or_create(EPOCH, START)
    assert records.commitments == {EPOCH: (1, commitment(key))} and MARK not in ring.entries()
    assert ring.asked[:2] == [MARK, MARK] and ring.fired() == 2


def test_a_loaded_key_is_cached_and_read_once():
    epochs, records, ring = scene()
    made = stored_key(ring, 3)
    records.commitments[EPOCH] = (3, commitment(made))
    first = epochs.get(EPOCH)
    assert first is not None and commitment(first) == commitment(made)
    assert epochs.get(EPOCH) is first and records.reads == 1 and ring.asked == [name(3)]


def test_get_or_create_caches_the_recorded_key_it_loads_and_checks_the_record_each_time():
    epochs, records, ring = scene()
    made = stored_key(ring, 2)
    records.commitments[EPOCH] = (2, commitment(made))
    first = epochs.get_or_create(EPOCH, START)
    assert epochs.get_or_create(EPOCH, START + 1) is first and epochs.get(EPOCH) is first
    assert records.reads == 2 and ring.asked == [name(2)]


def test_for_put_uses_the_cached_key_without_a_database_read_until_the_epoch_ends():
    epochs, records, _ = scene()
    key = epochs.get_or_create(EPOCH, START)
    reads = records.reads
    assert epochs.for_put(EPOCH, END - 1) is key and records.reads == reads
    for make in (epochs.for_put, epochs.get_or_create):  # refused before the database is read
        with pytest.raises(InvalidArgument) as refused:
            make(EPOCH, END)
        assert str(refused.value) == "an expiry epoch that has ended gets no key" and records.reads == reads


def test_a_cached_key_of_an_epoch_the_database_closed_is_dropped_though_no_other_is_made():
    epochs, records, _ = scene()
    epochs.get_or_create(EPOCH, START)
    del records.commitments[EPOCH]
    records.closed.add(EPOCH)
    for make in (epochs.get_or_create, epochs.for_put):  # for_put: from the database, not the cache
        with pytest.raises(InvalidArgument) as refused:
            make(EPOCH, START + 1)
        assert str(refused.value) == DESTROYED
    assert epochs.get(EPOCH) is None and len(records.reservations) == 3 and records.locks == 1


def test_a_key_another_process_recorded_meanwhile_is_used_and_this_attempt_tombstoned_unwritten():
    epochs, records, ring = scene(Records(first_attempt=2))
    theirs = stored_key(ring, 1)

    def another_process_records_its_key() -> None:
        records.commitments[EPOCH] = (1, commitment(theirs))

    records.on_reserve = another_process_records_its_key
    key = epochs.get_or_create(EPOCH, START)
    assert commitment(key) == commitment(theirs) and epochs.get(EPOCH) is key
    assert records.tombstoned == [(E, NUMBER, 2)] and name(2) not in ring.entries() and name(2) not in ring.asked


def test_a_reservation_abandoned_before_the_lock_writes_nothing():
    epochs, records, ring = scene()
    records.abandoned = True
    with pytest.raises(KeyUnavailable) as refused:
        epochs.get_or_create(EPOCH, START)
    assert str(refused.value) == ("an expiry epoch's key was destroyed or abandoned while it was being made; "
                                  "retry")
    assert name(1) not in ring.asked and records.commitments == {} and records.tombstoned == [(E, NUMBER, 1)]


def test_a_dead_key_row_of_the_epoch_stops_the_write():
    epochs, records, ring = scene(Records(first_attempt=2))
    records.dead_rows[EPOCH] = 1
    with pytest.raises(KeyUnavailable) as refused:
        epochs.get_or_create(EPOCH, START)
    assert str(refused.value) == UNRECORDED
    assert name(2) not in ring.asked and records.commitments == {} and records.tombstoned == [(E, NUMBER, 2)]


def test_the_last_attempt_destruction_probes_is_written():
    assert MAX_ATTEMPTS == 8
    epochs, records, ring = scene(Records(first_attempt=MAX_ATTEMPTS))
    key = epochs.get_or_create(EPOCH, START)
    assert records.commitments == {EPOCH: (MAX_ATTEMPTS, commitment(key))}
    assert ring.entries()[name(MAX_ATTEMPTS)] == key.entry().reveal()


def test_an_attempt_past_the_ones_destruction_probes_is_never_written():
    epochs, records, ring = scene(Records(first_attempt=MAX_ATTEMPTS + 1))
    with pytest.raises(KeyUnavailable) as refused:
        epochs.get_or_create(EPOCH, START)
    assert str(refused.value) == (
        "this expiry epoch's key attempts are used up (more failed writes than any keyring gives, or reservations "
        "planted by a writer of the database); its rows cannot be stored. Check the database with 'scratchvault "
        "doctor'")
    assert name(MAX_ATTEMPTS + 1) not in ring.asked and MADE_MARK not in ring.entries()
    assert records.commitments == {} and records.tombstoned == [(E, NUMBER, MAX_ATTEMPTS + 1)]


def test_entries_holding_the_next_attempts_names_are_left_and_no_further_attempt_is_reserved():
    epochs, records, ring = scene()
    held = {name(attempt): stored_key(ring, attempt).entry().reveal() for attempt in range(1, 4)}
    assert OCCUPIED_ATTEMPTS == 3
    with pytest.raises(KeyUnavailable) as refused:
        epochs.get_or_create(EPOCH, START)
    assert str(refused.value) == ("entries already held the names of this expiry epoch's next attempts (late "
                                  "keyring writes, or a database rolled back); nothing was written, retry")
    assert {user: ring.entries()[user] for user in held} == held and name(4) not in ring.asked
    assert len(records.reservations) == 3 and records.tombstoned == [(E, NUMBER, attempt) for attempt in (1, 2, 3)]
    assert epochs.destroyed_on_sight == 3 and records.commitments == {}


def test_an_entry_holding_the_attempts_name_is_passed_over_for_the_next_attempt():
    epochs, records, ring = scene()
    late = stored_key(ring, 1).entry().reveal()
    key = epochs.get_or_create(EPOCH, START)
    assert records.commitments == {EPOCH: (2, commitment(key))} and records.tombstoned == [(E, NUMBER, 1)]
    assert ring.entries()[name(1)] == late and epochs.destroyed_on_sight == 1


@pytest.mark.parametrize("conflict", ["another commitment", "another attempt"])
def test_a_key_the_database_does_not_record_as_written_is_never_returned(conflict):
    epochs, records, ring = scene()
    records.row_after_record = (1, b"\x00" * 32) if conflict == "another commitment" else None
    if conflict == "another attempt":
        def record_under_another_attempt(length: int, epoch: int, attempt: int, value: bytes) -> None:
            records.commitments[(length, epoch)] = (attempt + 1, value)  # the key's own commitment, wrong attempt

        records.record_epoch_commitment = record_under_another_attempt  # type: ignore[method-assign]
    with pytest.raises(KeyUnavailable) as refused:
        epochs.get_or_create(EPOCH, START)
    assert str(refused.value) == UNRECORDED and records.tombstoned == [(E, NUMBER, 1)]
    assert name(1) in ring.entries()  # left for the sweep of the tombstoned attempt, never used


def test_a_malformed_entry_of_the_recorded_attempt_is_named_as_an_epoch_key():
    epochs, records, ring = scene()
    ring.secrets[(SERVICE, name(1))] = "not a key"
    records.commitments[EPOCH] = (1, b"\x00" * 32)
    with pytest.raises(KeyUnavailable) as refused:
        epochs.get(EPOCH)
    assert str(refused.value) == ("the keyring entry for the expiry epoch key is malformed; restore it from the "
                                  "keyring backup")

