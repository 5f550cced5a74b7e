"""A backup of the database restored after an expiry epoch's key was destroyed, on both stores (the SQLite file's
online backup, a PostgreSQL schema copied by ``storage.backup``): the keyring's "destroyed through" marker, not
the restored tables, decides, so a destroyed key stays gone and is never made again, a later epoch's key still
opens, and a key missing beyond the marker is KeyUnavailable (threat_model.md, "Expiry epochs")."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from keys.testing import MemoryKeyring
from tests.keys.test_epoch_keys import (
    END,
    EPOCH,
    NUMBER,
    SERVICE,
    SKEW,
    START,
    VAULT_ID,
    E,
    epoch_entries,
    epochs_of,
    markers,
)
from vault import InvalidArgument, KeyUnavailable, storage
from vault.storage import Store

MARK = f"{E}.destroyed-through"
LATER = (E, NUMBER + 1)


@pytest.fixture
def backed_up(db_path, location_named) -> Iterator[Callable[[str], Callable[[], Store]]]:
    """``backed_up(name)`` takes a backup of the database now and returns how to open a store on it (restored),
    closed after the test."""
    opened: list[Store] = []

    def take(name: str) -> Callable[[], Store]:
        target = location_named(name)
        storage.backup(db_path, target)

        def restore() -> Store:
            opened.append(storage.open_store(target))
            return opened[-1]

        return restore

    yield take
    for store in opened:
        store.close()


def test_a_restored_backup_reads_a_destroyed_epochs_key_as_gone_and_a_later_epochs_key_still_opens(
        stores, backed_up):
    ring = MemoryKeyring()
    epochs = epochs_of(stores(), ring)
    epochs.get_or_create(EPOCH, START)
    later = epochs.get_or_create(LATER, START)
    restore = backed_up("backup.db")
    assert epochs.destroy_ended(END + SKEW).destroyed == [EPOCH] and markers(ring) == {MARK: str(NUMBER)}
    restored = epochs_of(restore(), ring)  # the backup lists both keys live; the clock is wound back
    assert restored.get(EPOCH) is None
    assert restored.get(LATER).commitment(VAULT_ID, *LATER) == later.commitment(VAULT_ID, *LATER)
    with pytest.raises(InvalidArgument, match="destroyed"):
        restored.get_or_create(EPOCH, START + 1)
    assert epoch_entries(ring) == [f"{E}.{NUMBER + 1}.1"]  # nothing made for the destroyed epoch


@pytest.mark.parametrize("marker", [None, str(NUMBER - 1), "garbage", "-1", "9" * 30])
def test_a_missing_key_the_marker_does_not_cover_is_key_unavailable(stores, backed_up, marker):
    ring = MemoryKeyring()
    epochs_of(stores(), ring).get_or_create(EPOCH, START)
    restore = backed_up("backup.db")
    epochs_of(stores(), ring).destroy_ended(END + SKEW)
    ring.secrets.pop((SERVICE, MARK), None)
    if marker is not None:
        ring.secrets[(SERVICE, MARK)] = marker
    with pytest.raises(KeyUnavailable, match="missing"):
        epochs_of(restore(), ring).get(EPOCH)


def test_a_restored_backup_taken_before_the_key_was_made_gets_no_new_key_for_the_destroyed_epoch(
        stores, backed_up):
    ring = MemoryKeyring()
    store = stores()
    store.commitments.live_epochs()  # the schema exists
    restore = backed_up("before.db")
    epochs_of(store, ring).get_or_create(EPOCH, START)
    epochs_of(store, ring).destroy_ended(END + SKEW)
    restored = epochs_of(restore(), ring)
    assert restored.get(EPOCH) is None
    with pytest.raises(InvalidArgument, match="destroyed"):
        restored.get_or_create(EPOCH, START + 1)
    assert epoch_entries(ring) == []


def test_a_rolled_back_database_does_not_bring_a_destroyed_key_back(stores, backed_up):
    ring = MemoryKeyring()
    epochs = epochs_of(stores(), ring)
    epochs.get_or_create(EPOCH, START)
    restore = backed_up("backup.db")
    epochs.destroy_ended(END + SKEW)
    restored = epochs_of(restore(), ring)  # the backup lists the key live; the keyring's marker says destroyed
    assert restored.get(EPOCH) is None
    with pytest.raises(InvalidArgument, match="destroyed"):
        restored.get_or_create(EPOCH, START + 1)  # the clock wound back
    assert epoch_entries(ring) == []
