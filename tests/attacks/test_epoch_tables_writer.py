"""A writer of the epoch tables against expiry as erasure: deleting a live epoch's key
record, rolling its records back, or pushing an expiry out of range never erases a live key, deletes live rows or
escapes as another exception, and a swept flag it sets never keeps an ended key alive. Each test states the property
threat_model.md ("Expiry epochs") claims. Both stores (``db_path``, the
``attacker``), with the clock in the tests' hands."""

from __future__ import annotations

import pytest

from keys.testing import MemoryKeyring
from tests.keys.test_key_faults import FaultyKeyring
from tests.support.clock import T0, FakeClock
from tests.support.epochs import SKEW, E, epoch_entries
from vault import IntegrityError, Principal, Vault, storage

ALICE = Principal("alice")
LIVE = f"{E}.500000.1"  # T0 starts epoch 500,000 of the default length


def _put_then_forget_the_epoch_record(db_path, attacker, ring, clock, location_named):
    """A row in epoch 500,000 (live until T0 + 1800), a backup of the database, then the writer deletes the epoch's
    key record (one row of epoch_keys). Returns (row id, backup location)."""
    with Vault.open(db_path, keyring_backend=ring, clock=clock) as vault:
        row = vault.put(ALICE, "t", 1, "x", "live row", ttl_seconds=1800).id
    backup = location_named("backup.db")
    storage.backup(db_path, backup)
    attacker.run(("DELETE FROM epoch_keys WHERE length = ? AND epoch = ?", E, 500000))
    return row, backup


def test_a_writer_cannot_make_gc_erase_a_live_epoch_key_by_deleting_its_record(
        db_path, attacker, location_named):
    ring, clock = MemoryKeyring(), FakeClock(T0)
    row, backup = _put_then_forget_the_epoch_record(db_path, attacker, ring, clock, location_named)
    clock.now = T0 + 100  # past the abandonment delay (2 x keyring_timeout + 60 s) of attempt 1's reservation
    with Vault.open(db_path, keyring_backend=ring, clock=clock) as vault:
        vault.put(ALICE, "t", 2, "x", "another row", ttl_seconds=1700)  # same epoch: it gets a second key
        vault.gc()
    assert LIVE in epoch_entries(ring), epoch_entries(ring)  # the key of live rows is still in the keyring
    with Vault.open(backup, keyring_backend=ring, clock=clock) as copy:  # and the backup from before opens them
        assert copy.get(ALICE, row).content == "live row"


def test_a_writer_cannot_make_a_put_erase_a_live_epoch_key_by_rolling_back_its_records(
        db_path, attacker, location_named):
    ring, clock = MemoryKeyring(), FakeClock(T0)
    row, backup = _put_then_forget_the_epoch_record(db_path, attacker, ring, clock, location_named)
    attacker.run(("DELETE FROM epoch_reservations WHERE length = ? AND epoch = ?", E, 500000))
    with Vault.open(db_path, keyring_backend=ring, clock=clock) as vault:
        vault.put(ALICE, "t", 2, "x", "another row", ttl_seconds=1700)
    with Vault.open(backup, keyring_backend=ring, clock=clock) as copy:
        assert copy.get(ALICE, row).content == "live row"


def test_an_ended_epoch_key_whose_delete_failed_once_is_destroyed_whatever_the_database_says(
        db_path, keyring_backend, attacker, clock):
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault:
        vault.put(ALICE, "t", 1, "x", "short: the dentist is on Tuesday", ttl_seconds=600)
    clock.now = T0 + E + SKEW
    refusing = FaultyKeyring(keyring_backend.secrets, {"delete"})
    with Vault.open(db_path, keyring_backend=refusing, clock=clock) as vault:
        vault.gc()
    assert LIVE in epoch_entries(keyring_backend)  # pending: the next gc retries it
    attacker.run("UPDATE epoch_tombstones SET swept = (1 = 1)")  # true on both stores
    for hours in range(1, 4):
        clock.now = T0 + E + SKEW + hours * E
        with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault:
            vault.gc()
    assert LIVE not in epoch_entries(keyring_backend), epoch_entries(keyring_backend)


@pytest.mark.parametrize("call", ["get", "read", "list"])
def test_an_expiry_column_far_in_the_future_is_an_integrity_error_on_every_read(
        vault, attacker, alice, call):
    row = vault.put(alice, "t", 1, "x", "live row", ttl_seconds=1800).id
    attacker.write(attacker.seq_of(row), "expires_at", 1e300)
    calls = {"get": lambda: vault.get(alice, row), "read": lambda: vault.read(alice, row),
             "list": lambda: vault.list_for_turn(alice, "t")}
    with pytest.raises(IntegrityError):
        calls[call]()


@pytest.mark.parametrize("step", ["rewrap", "maintain_keys"])
def test_key_maintenance_never_deletes_a_live_row_whose_epoch_record_a_writer_removed(
        db_path, attacker, location_named, step):
    ring, clock = MemoryKeyring(), FakeClock(T0)
    row, _ = _put_then_forget_the_epoch_record(db_path, attacker, ring, clock, location_named)
    with Vault.open(db_path, keyring_backend=ring, clock=clock) as vault:
        with pytest.raises(IntegrityError):  # what every read says of the row
            vault.get(ALICE, row)
        if step == "rewrap":
            vault.rotate_owner_key("alice")
            with pytest.raises(IntegrityError):  # rewrap must say so too, and keep the row
                vault.rewrap("alice")
        else:
            failed = vault.maintain_keys().failed
            assert [type(error) for _, error in failed] == [IntegrityError]
    assert row in attacker.row_ids()
