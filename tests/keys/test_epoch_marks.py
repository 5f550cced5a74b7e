"""The keyring's "destroyed through" marker of expiry epochs (keys/epochs/marks.py), the probe for entries the
database no longer lists and the sweep's rules (keys/epochs/sweep.py), and the check a put makes inside its transaction
(``EpochKeys.still_recorded``): a restored backup of the database, its clock wound back, reads a destroyed epoch's
key as gone (NotFound for its rows), never as a missing key; only a key not known destroyed is KeyUnavailable."""

from __future__ import annotations

import os
import sqlite3

import pytest

from keys.epochs.sweep import MAX_ATTEMPTS
from keys.keyring.entries import serialize_single_key
from keys.testing import MemoryKeyring
from tests.keys.test_epoch_attacks import plant
from tests.keys.test_epoch_keys import (
    END,
    EPOCH,
    NUMBER,
    SERVICE,
    SKEW,
    START,
    VAULT_ID,
    E,
    FaultyKeyring,
    epoch_entries,
    epochs_of,
    markers,
)
from vault import InvalidArgument, KeyUnavailable, storage

MARK = f"{E}.destroyed-through"
LATER = (E, NUMBER + 1)


def copy_of(db_path, tmp_path, name: str):
    """A backup of the SQLite file as it is now (the online backup API: what a nightly backup takes)."""
    backup = tmp_path / name
    with sqlite3.connect(db_path) as source, sqlite3.connect(backup) as copy:
        source.backup(copy)
    return backup


@pytest.fixture
def restore(tmp_path):
    opened = []

    def open_copy(path):
        opened.append(storage.open_store(path))
        return opened[-1]

    yield open_copy
    for store in opened:
        store.close()


@pytest.mark.sqlite_only("copies the SQLite file")
def test_a_restored_backup_reads_a_destroyed_epochs_key_as_gone_and_a_later_epochs_key_still_opens(
        stores, db_path, tmp_path, restore):
    ring = MemoryKeyring()
    epochs = epochs_of(stores(), ring)
    epochs.get_or_create(EPOCH, START)
    later = epochs.get_or_create(LATER, START)
    backup = copy_of(db_path, tmp_path, "backup.db")
    assert epochs.destroy_ended(END + SKEW).destroyed == [EPOCH] and markers(ring) == {MARK: str(NUMBER)}
    restored = epochs_of(restore(backup), ring)  # the backup lists both keys live; the clock is wound back
    assert restored.get(EPOCH) is None
    assert restored.get(LATER).commitment(VAULT_ID, *LATER) == later.commitment(VAULT_ID, *LATER)
    with pytest.raises(InvalidArgument, match="destroyed"):
        restored.get_or_create(EPOCH, START + 1)
    assert epoch_entries(ring) == [f"{E}.{NUMBER + 1}.1"]  # nothing made for the destroyed epoch


@pytest.mark.sqlite_only("copies the SQLite file")
@pytest.mark.parametrize("marker", [None, str(NUMBER - 1), "garbage", "-1", "9" * 30])
def test_a_missing_key_the_marker_does_not_cover_is_key_unavailable(stores, db_path, tmp_path, restore, marker):
    ring = MemoryKeyring()
    epochs_of(stores(), ring).get_or_create(EPOCH, START)
    backup = copy_of(db_path, tmp_path, "backup.db")
    epochs_of(stores(), ring).destroy_ended(END + SKEW)
    ring.secrets.pop((SERVICE, MARK), None)
    if marker is not None:
        ring.secrets[(SERVICE, MARK)] = marker
    with pytest.raises(KeyUnavailable, match="missing"):
        epochs_of(restore(backup), ring).get(EPOCH)


@pytest.mark.sqlite_only("copies the SQLite file")
def test_a_restored_backup_taken_before_the_key_was_made_gets_no_new_key_for_the_destroyed_epoch(
        stores, db_path, tmp_path, restore):
    ring = MemoryKeyring()
    store = stores()
    store.commitments.live_epochs()  # the schema exists
    backup = copy_of(db_path, tmp_path, "before.db")
    epochs_of(store, ring).get_or_create(EPOCH, START)
    epochs_of(store, ring).destroy_ended(END + SKEW)
    restored = epochs_of(restore(backup), ring)
    assert restored.get(EPOCH) is None
    with pytest.raises(InvalidArgument, match="destroyed"):
        restored.get_or_create(EPOCH, START + 1)
    assert epoch_entries(ring) == []


def test_the_marker_only_rises_and_a_keyring_refusing_it_does_not_stop_the_deletes(stores):
    ring = FaultyKeyring()
    epochs, behind = epochs_of(stores(), ring), epochs_of(stores(), ring)
    for epoch in (EPOCH, LATER):
        epochs.get_or_create(epoch, START)
    assert markers(ring) == {MARK: str(NUMBER - 2)}  # where a destruction at START would set it
    ring.refuse_writes = True
    done = epochs.destroy_ended(END + SKEW)
    assert done.destroyed == [EPOCH] and epoch_entries(ring) == [f"{E}.{NUMBER + 1}.1"]
    assert markers(ring) == {MARK: str(NUMBER - 2)}
    ring.refuse_writes = False
    assert epochs.destroy_ended(END + E + SKEW).destroyed == [LATER] and markers(ring) == {MARK: str(NUMBER + 1)}
    behind.destroy_ended(END + SKEW)  # a process whose clock is behind
    assert markers(ring) == {MARK: str(NUMBER + 1)} and epoch_entries(ring) == []


def test_a_put_checks_in_its_transaction_that_the_key_is_still_recorded(stores):
    ring, store = MemoryKeyring(), stores()
    gc, put = epochs_of(stores(), ring), epochs_of(store, ring)
    key = put.get_or_create(EPOCH, START)
    other = put.get_or_create(LATER, START)
    assert put.still_recorded(EPOCH, key, store.commitments.epoch_commitment(*EPOCH))
    assert not put.still_recorded(EPOCH, other, store.commitments.epoch_commitment(*EPOCH))
    assert gc.destroy_ended(END + SKEW).destroyed == [EPOCH]
    assert not put.still_recorded(EPOCH, key, store.commitments.epoch_commitment(*EPOCH))
    assert put.get(EPOCH) is None  # the refused key left the cache


def test_an_unlisted_entry_under_a_later_attempt_is_found_once_its_epoch_ends(stores):
    ring = MemoryKeyring()
    epochs = epochs_of(stores(), ring)
    epochs.get_or_create(LATER, START)  # the vault's first key: its marker starts below NUMBER
    planted = serialize_single_key(os.urandom(32)).reveal()
    ring.secrets[(SERVICE, f"{E}.{NUMBER}.2")] = planted  # a key whose every record a writer removed
    ring.secrets[(SERVICE, f"{E}.{NUMBER + 5}.1")] = planted  # an epoch not ended: not looked at yet
    done = epochs.destroy_ended(END + SKEW)
    assert done.found_unlisted == [(E, NUMBER, 2)] and done.destroyed == []
    assert epoch_entries(ring) == [f"{E}.{NUMBER + 1}.1", f"{E}.{NUMBER + 5}.1"]
    assert epochs.destroy_ended(START + 6 * E + SKEW).found_unlisted == [(E, NUMBER + 5, 1)]
    assert epoch_entries(ring) == []


@pytest.mark.sqlite_only("rewrites rows in the SQLite file")
@pytest.mark.parametrize("rewrite", ["DELETE FROM epoch_keys", "UPDATE epoch_keys SET attempt = 9"])
def test_a_live_epochs_key_record_removed_or_moved_and_its_key_tombstoned_is_not_swept_before_the_end(
        stores, db_path, rewrite):
    ring, store = MemoryKeyring(), stores()
    epochs_of(store, ring).get_or_create(EPOCH, START)
    plant(db_path, rewrite, f"INSERT INTO epoch_tombstones VALUES ({E}, {NUMBER}, 1, x'', 0)")
    epochs = epochs_of(stores(), ring)  # no cache: the database no longer shows a working key beside attempt 1
    assert epochs.sweep(START + 60) == [] and epoch_entries(ring) == [f"{E}.{NUMBER}.1"]
    assert epochs.destroy_ended(END + SKEW).pending == [] and epoch_entries(ring) == []


class CountingKeyring(MemoryKeyring):
    """Counts the calls the vault makes to the keyring."""

    calls = 0

    def get_password(self, service, username):
        type(self).calls += 1
        return super().get_password(service, username)

    def set_password(self, service, username, password):
        type(self).calls += 1
        super().set_password(service, username, password)

    def delete_password(self, service, username):
        type(self).calls += 1
        super().delete_password(service, username)


def test_a_destruction_asks_the_keyring_only_when_an_epoch_has_ended_since_the_last(stores):
    ring = CountingKeyring()
    epochs = epochs_of(stores(), ring)
    per_gc = []
    for hour in range(12):  # a put an hour expiring 3 h later; gc at 10 and 40 minutes past
        now = START + hour * E + 600
        epochs.get_or_create(epochs.epoch_of_expiry(now + 3 * E), now)
        for minutes in (10, 40):
            CountingKeyring.calls = 0
            epochs.destroy_ended(START + hour * E + minutes * 60)
            per_gc.append(CountingKeyring.calls)
    assert per_gc[1::2] == [0] * 12  # nothing ended since the gc half an hour before
    # every attempt of the newly ended epoch probed, the marker read, raised (set and read back), a delete and its check
    assert max(per_gc) <= MAX_ATTEMPTS + 6, per_gc
