"""An operator who changes the epoch length leaves keys of the old length behind: gc must still find them in the
keyring after a writer deleted their records, so a copy of the database opens nothing of the expired rows; and a
writer of the keyring's list of lengths cannot stop gc with values that are no length."""

from __future__ import annotations

from keys.testing import MemoryKeyring
from tests.support.clock import T0, FakeClock
from tests.support.epochs import SKEW, E, assert_nothing_of, epoch_entries
from vault import Principal, Vault, storage

ALICE, BOB = Principal("alice"), Principal("bob")


def test_gc_never_probes_the_epochs_of_a_length_the_vault_no_longer_uses(db_path, attacker, location_named):
    ring, clock = MemoryKeyring(), FakeClock(T0)
    with Vault.open(db_path, keyring_backend=ring, clock=clock, epoch_seconds=600) as vault:
        row = vault.put(ALICE, "t", 1, "x", "the dentist is on Tuesday", ttl_seconds=300).id
        backup = location_named("backup.db")
        storage.backup(db_path, backup)
    attacker.run("DELETE FROM epoch_keys WHERE length = 600", "DELETE FROM epoch_reservations WHERE length = 600",
                 "DELETE FROM epoch_tombstones WHERE length = 600")
    with Vault.open(db_path, keyring_backend=ring, clock=clock) as vault:  # the operator goes back to the default
        vault.put(BOB, "t", 1, "x", "bob", ttl_seconds=86400)
        for _ in range(3):
            clock.advance(86400)
            vault.gc()
        left = [entry for entry in epoch_entries(ring) if entry.startswith("600.")]
    clock.now = T0
    with Vault.open(backup, keyring_backend=ring, clock=clock, epoch_seconds=600) as copy:
        assert left == [], left
        assert_nothing_of(copy, ALICE, row)


def test_values_that_are_no_length_planted_in_the_keyrings_list_of_lengths_never_stop_gc(db_path):
    ring, clock = MemoryKeyring(), FakeClock(T0)
    with Vault.open(db_path, keyring_backend=ring, clock=clock) as vault:
        row = vault.put(ALICE, "t", 1, "x", "the dentist is on Tuesday", ttl_seconds=300).id
    (listed,) = [entry for entry in ring.secrets if entry[0].endswith("/epoch-lengths")]
    ring.secrets[listed] = "0,1,59,86401,999999," + ring.secrets[listed]  # a zero would divide gc's clock by zero
    clock.advance(E + SKEW)
    with Vault.open(db_path, keyring_backend=ring, clock=clock) as vault:
        assert vault.gc() == 1 and epoch_entries(ring) == []
        assert_nothing_of(vault, ALICE, row)
