"""A trigger planted on the epoch tables while the vault runs deletes each tombstone as it is written: closing an
ended epoch must refuse (the schema is not the vault's) rather than report the key destroyed while its entry
stays, and a copy of the database taken before must not open the expired row with the clock wound back."""

from __future__ import annotations

import contextlib

import pytest

from keys.testing import MemoryKeyring
from tests.attacks.stores import STORE
from tests.support.clock import T0, FakeClock
from tests.support.epochs import SKEW, E, assert_nothing_of, epoch_entries
from vault import IntegrityError, Principal, Vault, storage

ALICE, BOB = Principal("alice"), Principal("bob")


@pytest.mark.skipif(STORE != "sqlite", reason="SQLite's close_epochs")
def test_trigger_planted_while_open_voids_gc_of_an_epoch_key(db_path, attacker, location_named):
    ring, clock = MemoryKeyring(), FakeClock(T0)
    epoch = int(T0) // E
    with Vault.open(db_path, keyring_backend=ring, clock=clock) as vault:
        vault.put(BOB, "t", 1, "x", "bob's row lives in a later epoch", ttl_seconds=2 * 86400)
        row = vault.put(ALICE, "t", 1, "x", "the dentist is on Tuesday", ttl_seconds=600).id
        backup = location_named("backup.db")
        storage.backup(db_path, backup)
        # planted after the open (the only full catalog check): every tombstone of a real attempt disappears
        attacker.run("CREATE TRIGGER hide AFTER INSERT ON epoch_tombstones WHEN new.attempt > 0 BEGIN "
                     "DELETE FROM epoch_tombstones WHERE length = new.length AND epoch = new.epoch "
                     "AND attempt = new.attempt; END")
        clock.now = (epoch + 1) * E + SKEW
        with contextlib.suppress(IntegrityError):  # the fix: refused here
            vault.gc()  # cb3f9d5: reports success (SQLite's close_epochs checks no schema and reads nothing back)
        attacker.run("DROP TRIGGER hide")
        vault.gc()
        clock.now += 10 * E
        vault.gc()
        left = [entry for entry in epoch_entries(ring) if entry.startswith(f"{E}.{epoch}.")]
    clock.now = T0
    with Vault.open(backup, keyring_backend=ring, clock=clock) as copy:
        assert left == [], left  # cb3f9d5: ['3600.500000.1'], and the copy reads the row
        assert_nothing_of(copy, ALICE, row)
