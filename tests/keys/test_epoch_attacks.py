"""Attacks on the expiry epochs' key store, which row format 3 relies on (threat_model.md, "Expiry epochs"): a
writer of the database, a clock behind, a second process with a cache, a COMMIT that fails. Each test states the
property the key store keeps against one of them."""

from __future__ import annotations

import contextlib
import os
import pickle
import sqlite3

import pytest

from keys.epochs.epoch_key import EpochKey
from keys.keyring.entries import serialize_single_key
from keys.testing import MemoryKeyring
from tests.keys.test_epoch_keys import (
    END,
    EPOCH,
    NUMBER,
    SERVICE,
    SKEW,
    START,
    E,
    commitment,
    epoch_entries,
    epochs_of,
)
from vault import InvalidArgument, KeyUnavailable, VaultError, storage


def plant(db_path, *statements):
    """The attacker: a writer of the SQLite file, with the vault's own connections open."""
    connection = sqlite3.connect(db_path)
    try:
        with connection:
            for statement in statements:
                connection.execute(statement)
    finally:
        connection.close()


@pytest.mark.sqlite_only("plants rows in the SQLite file")
def test_a_planted_dead_key_row_never_makes_the_vault_use_a_key_it_did_not_record(stores, db_path):
    ring, store = MemoryKeyring(), stores()
    store.commitments.live_epochs()  # the schema exists
    plant(db_path, f"INSERT INTO epoch_keys VALUES ({E}, {NUMBER}, 7, x'00')",
          f"INSERT INTO epoch_tombstones VALUES ({E}, {NUMBER}, 7, x'00', 1)")
    first, second = epochs_of(store, ring), epochs_of(stores(), ring)
    try:
        used = first.get_or_create(EPOCH, START)
    except VaultError:  # refusing is sound; without writing a keyring entry per refused put
        assert epoch_entries(ring) == [] and first.get(EPOCH) is None
        return
    recorded = store.commitments.epoch_commitment(*EPOCH)
    assert recorded is not None and recorded[1] == commitment(used), "a key was handed out uncommitted"
    assert commitment(second.get_or_create(EPOCH, START + 1)) == commitment(used), "two keys for one epoch"


@pytest.mark.sqlite_only("plants a trigger in the SQLite file")
def test_a_record_the_database_silently_drops_is_read_back_and_its_key_never_used(stores, db_path):
    ring, store = MemoryKeyring(), stores()
    store.commitments.live_epochs()
    plant(db_path, "CREATE TRIGGER drop_it BEFORE INSERT ON epoch_keys BEGIN SELECT RAISE(IGNORE); END")
    epochs = epochs_of(store, ring)
    with pytest.raises(KeyUnavailable, match="did not record"):
        epochs.get_or_create(EPOCH, START)
    # its tombstone is refused too while the trigger sits on the table: the probe of the ended epoch finds the entry
    assert store.commitments.epoch_tombstones(unswept_only=True) == []
    plant(db_path, "DROP TRIGGER drop_it")
    assert commitment(epochs.get_or_create(EPOCH, START)) == store.commitments.epoch_commitment(*EPOCH)[1]
    assert epochs.destroy_ended(END + SKEW).pending == [] and epoch_entries(ring) == []


@pytest.mark.sqlite_only("plants rows in the SQLite file")
def test_a_tombstone_planted_as_swept_does_not_keep_an_ended_epochs_key_alive(stores, db_path):
    ring, store = MemoryKeyring(), stores()
    epochs = epochs_of(store, ring)
    epochs.get_or_create(EPOCH, START)
    plant(db_path, f"INSERT INTO epoch_tombstones VALUES ({E}, {NUMBER}, 1, x'', 1)")  # after the epoch ended
    assert epochs.destroy_ended(END + SKEW).destroyed == [EPOCH]
    assert epochs.overdue(END + SKEW + 1) == []
    assert epoch_entries(ring) == [], "the vault says destroyed; the keyring still holds the key"


@pytest.mark.sqlite_only("deletes rows in the SQLite file")
def test_an_entry_whose_key_record_was_deleted_is_found_and_destroyed_when_its_epoch_ends(stores, db_path):
    ring, store = MemoryKeyring(), stores()
    epochs = epochs_of(store, ring)
    epochs.get_or_create(EPOCH, START)
    plant(db_path, "DELETE FROM epoch_keys", "DELETE FROM epoch_reservations")
    assert epochs.destroy_ended(END + SKEW - 1).found_unlisted == []  # not ended yet: not looked for
    done = epochs.destroy_ended(END + SKEW)
    assert done.found_unlisted == [(E, NUMBER, 1)] and done.pending == [] and epoch_entries(ring) == []
    assert epochs.overdue(END + SKEW) == [] and epochs.get(EPOCH) is None
    with pytest.raises(InvalidArgument, match="destroyed"):  # closed for good, as a listed epoch would be
        epochs_of(stores(), ring).get_or_create(EPOCH, START + 1)


@pytest.mark.sqlite_only("plants rows in the SQLite file")
def test_one_malformed_epoch_row_is_reported_and_does_not_block_the_destruction_of_the_others(stores, db_path):
    ring, store = MemoryKeyring(), stores()
    epochs = epochs_of(store, ring)
    epochs.get_or_create(EPOCH, START)
    plant(db_path, f"INSERT INTO epoch_keys VALUES ({E}, -5, 1, x'00')",
          f"INSERT INTO epoch_tombstones VALUES (0, {NUMBER}, 1, x'', 0)",  # a length no vault uses: no division by 0
          f"INSERT INTO epoch_reservations VALUES ({E}, 'five', 1, 0)")
    done = epochs.destroy_ended(END + SKEW)
    assert done.destroyed == [EPOCH] and epoch_entries(ring) == [], "the genuine ended epoch's key survived"
    assert done.bad_rows == 3 and epochs.bad_rows() == 3 and epochs.overdue(END + SKEW) == []


def test_a_cached_key_is_not_handed_out_for_an_epoch_that_has_ended(stores):
    epochs = epochs_of(stores(), MemoryKeyring())
    epochs.get_or_create(EPOCH, START)
    with pytest.raises(InvalidArgument):
        epochs.get_or_create(EPOCH, END + SKEW + 60)


def test_a_host_behind_with_a_cached_key_is_refused_once_another_destroyed_the_epoch(stores):
    ring = MemoryKeyring()
    gc, behind = epochs_of(stores(), ring), epochs_of(stores(), ring)
    behind.get_or_create(EPOCH, START)
    assert gc.destroy_ended(END + SKEW).destroyed == [EPOCH] and epoch_entries(ring) == []
    with pytest.raises(InvalidArgument):
        behind.get_or_create(EPOCH, START + 1)  # its clock says the epoch has not ended


# What holds -----------------------------------------------------------------------------------------------------

def test_a_commitment_moved_to_another_epoch_is_key_unavailable(stores):
    ring, store = MemoryKeyring(), stores()
    made = epochs_of(store, ring).get_or_create(EPOCH, START)
    other = (E, NUMBER + 1)
    epochs_of(store, ring).get_or_create(other, START)
    ring.secrets[(SERVICE, f"{E}.{NUMBER + 1}.1")] = made.entry().reveal()  # the keyring hands one key under both
    with pytest.raises(KeyUnavailable, match="different key"):
        epochs_of(stores(), ring).get(other)


def test_a_closed_epoch_is_refused_to_a_host_behind_without_a_cache_and_after_the_keys_entry_came_back(stores):
    ring = MemoryKeyring()
    epochs = epochs_of(stores(), ring)
    made = epochs.get_or_create(EPOCH, START)
    epochs.destroy_ended(END + SKEW)
    ring.secrets[(SERVICE, f"{E}.{NUMBER}.1")] = made.entry().reveal()  # a late write or keyring restore
    fresh = epochs_of(stores(), ring)
    assert fresh.get(EPOCH) is None
    with pytest.raises(InvalidArgument, match="destroyed"):
        fresh.get_or_create(EPOCH, START + 1)


def test_a_rolled_back_database_does_not_bring_a_destroyed_key_back(stores, db_path, tmp_path):
    if not str(db_path).endswith(".db") and "://" in str(db_path):
        pytest.skip("copies the SQLite file")
    ring, store = MemoryKeyring(), stores()
    epochs = epochs_of(store, ring)
    epochs.get_or_create(EPOCH, START)
    backup = tmp_path / "backup.db"
    with sqlite3.connect(db_path) as source, sqlite3.connect(backup) as copy:
        source.backup(copy)
    epochs.destroy_ended(END + SKEW)
    restored = storage.open_store(backup)
    try:  # the backup lists the key live; the keyring's marker says it was destroyed: expired, not missing
        assert epochs_of(restored, ring).get(EPOCH) is None
        with pytest.raises(InvalidArgument, match="destroyed"):
            epochs_of(restored, ring).get_or_create(EPOCH, START + 1)  # the clock wound back
        assert epoch_entries(ring) == []
    finally:
        restored.close()


def test_no_key_bytes_in_reprs_errors_or_pickles(stores):
    ring = MemoryKeyring()
    epochs = epochs_of(stores(), ring)
    key = epochs.get_or_create(EPOCH, START)
    raw = ring.secrets[(SERVICE, f"{E}.{NUMBER}.1")]
    for shown in (repr(key), repr(epochs), str(key.entry()), repr(key.entry())):
        assert raw not in shown and "<" in shown
    for thing in (key, epochs):
        with pytest.raises(TypeError):
            pickle.dumps(thing)
    ring.secrets[(SERVICE, f"{E}.{NUMBER}.1")] = serialize_single_key(os.urandom(31)).reveal()  # garbage
    with pytest.raises(VaultError) as caught:
        epochs_of(stores(), ring).get(EPOCH)
    assert raw not in str(caught.value) and caught.value.__cause__ is None
    assert EpochKey  # imported for the type the reprs belong to


# PostgreSQL: the same store contract, the attacker with the server's keys (pg_admin) ----------------------------

@pytest.fixture
def pg_epochs(pg_location):
    opened = []

    def open_epochs(ring):
        opened.append(storage.open_store(pg_location))
        return epochs_of(opened[-1], ring)

    yield open_epochs
    for store in opened:
        store.close()


@pytest.mark.postgres
def test_pg_one_overflowing_epoch_row_is_reported_and_does_not_block_the_destruction_of_the_others(pg_epochs, pg_admin):
    ring = MemoryKeyring()
    epochs = pg_epochs(ring)
    epochs.get_or_create(EPOCH, START)
    pg_admin.execute(f"INSERT INTO epoch_keys VALUES ({E}, {2**62}, 1, '\\x00'::bytea)")
    pg_admin.execute(f"INSERT INTO epoch_tombstones VALUES (0, {NUMBER}, 1, '\\x'::bytea, false)")
    done = epochs.destroy_ended(END + SKEW)
    assert done.destroyed == [EPOCH] and epoch_entries(ring) == [], "the genuine ended epoch's key survived"
    assert done.bad_rows == 2 and epochs.bad_rows() == 2 and epochs.overdue(END + SKEW) == []


@pytest.mark.postgres
def test_pg_an_overflowing_epoch_row_raises_only_a_vault_error(pg_epochs, pg_admin):
    ring = MemoryKeyring()
    epochs = pg_epochs(ring)
    epochs.get_or_create(EPOCH, START)
    pg_admin.execute(f"INSERT INTO epoch_keys VALUES ({E}, {2**62}, 1, '\\x00'::bytea)")
    for call in (lambda: epochs.destroy_ended(END + SKEW), lambda: epochs.overdue(END + SKEW)):
        with contextlib.suppress(VaultError):
            call()


@pytest.mark.postgres
def test_pg_a_planted_dead_key_row_never_makes_the_vault_use_a_key_it_did_not_record(pg_epochs, pg_admin):
    ring = MemoryKeyring()
    first = pg_epochs(ring)
    pg_admin.execute(f"INSERT INTO epoch_keys VALUES ({E}, {NUMBER}, 7, '\\x00'::bytea)")
    pg_admin.execute(f"INSERT INTO epoch_tombstones VALUES ({E}, {NUMBER}, 7, '\\x00'::bytea, true)")
    try:
        used = first.get_or_create(EPOCH, START)
    except VaultError:
        return
    assert commitment(pg_epochs(ring).get_or_create(EPOCH, START + 1)) == commitment(used), "two keys, one epoch"


@pytest.mark.postgres
def test_pg_a_tombstone_planted_as_swept_does_not_keep_an_ended_epochs_key_alive(pg_epochs, pg_admin):
    ring = MemoryKeyring()
    epochs = pg_epochs(ring)
    epochs.get_or_create(EPOCH, START)
    pg_admin.execute(f"INSERT INTO epoch_tombstones VALUES ({E}, {NUMBER}, 1, '\\x'::bytea, true)")
    assert epochs.destroy_ended(END + SKEW).destroyed == [EPOCH] and epochs.overdue(END + SKEW + 1) == []
    assert epoch_entries(ring) == [], "the vault says destroyed; the keyring still holds the key"


@pytest.mark.postgres
def test_pg_a_commit_that_fails_after_the_write_leaves_no_unrecorded_key_cached(pg_epochs, pg_admin):
    ring = MemoryKeyring()
    first = pg_epochs(ring)
    first.get((E, NUMBER + 5))  # the store is open and checked before the fault is planted
    pg_admin.execute("CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS "
                     "$$BEGIN RAISE EXCEPTION 'server lost'; END$$")
    pg_admin.execute("CREATE CONSTRAINT TRIGGER lost AFTER INSERT ON epoch_keys DEFERRABLE INITIALLY DEFERRED "
                     "FOR EACH ROW EXECUTE FUNCTION refuse()")
    with pytest.raises(VaultError):
        first.get_or_create(EPOCH, START)
    pg_admin.execute("DROP TRIGGER lost ON epoch_keys")
    try:
        used = first.get_or_create(EPOCH, START + 1)
    except VaultError:
        return
    assert commitment(pg_epochs(ring).get_or_create(EPOCH, START + 2)) == commitment(used), "two keys, one epoch"


@pytest.mark.sqlite_only("plants rows in the SQLite file")
def test_an_attempt_number_at_the_top_of_the_range_raises_only_a_vault_error(stores, db_path):
    ring, store = MemoryKeyring(), stores()
    store.commitments.live_epochs()
    plant(db_path, f"INSERT INTO epoch_reservations VALUES ({E}, {NUMBER}, {2**63 - 1}, 0)")
    with pytest.raises(VaultError):
        epochs_of(store, ring).get_or_create(EPOCH, START)
    assert epoch_entries(ring) == []


@pytest.mark.sqlite_only("plants rows in the SQLite file")
def test_a_tombstone_planted_for_a_live_epochs_key_is_refused_and_reported_not_swept(stores, db_path):
    ring, store = MemoryKeyring(), stores()
    epochs = epochs_of(store, ring)
    epochs.get_or_create(EPOCH, START)
    plant(db_path, f"INSERT INTO epoch_tombstones VALUES ({E}, {NUMBER}, 1, x'', 0)")
    done = epochs.destroy_ended(START + 60)  # the epoch has 59 minutes to run
    assert epoch_entries(ring) == [f"{E}.{NUMBER}.1"], "a live epoch's key was deleted from the keyring"
    assert done.refused == [(E, NUMBER, 1)] and epochs.sweep(START + 60) == []
    assert epochs.destroy_ended(END + SKEW).refused == [] and epoch_entries(ring) == []  # ended: it goes
