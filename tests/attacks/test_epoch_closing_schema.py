"""A trigger planted on the epoch tables while the vault runs deletes each tombstone as it is written: closing an
ended epoch must refuse (the schema is not the vault's) rather than report the key destroyed while its entry
stays, and a copy of the database taken before must not open the expired row with the clock wound back. Both
stores, each with its own spelling of the trigger."""

from __future__ import annotations

import contextlib

from keys.testing import MemoryKeyring
from tests.attacks.stores import STORE
from tests.support.clock import T0, FakeClock
from tests.support.epochs import SKEW, E, assert_nothing_of, epoch_entries
from vault import IntegrityError, Principal, Vault, storage

ALICE, BOB = Principal("alice"), Principal("bob")
HIDE = "IF new.attempt > 0 THEN DELETE FROM epoch_tombstones WHERE length = new.length AND epoch = new.epoch " \
       "AND attempt = new.attempt; END IF; RETURN NULL; END $$"


def postgres_hiding_trigger(before: str = "") -> tuple[list[str], list[str]]:
    """(plant, drop) of the trigger as the tables' owner writes it on PostgreSQL; ``before`` runs first in it."""
    return (["SET LOCAL ROLE vault_app",
             "CREATE FUNCTION hide() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN " + before + HIDE,
             "CREATE TRIGGER hide AFTER INSERT ON epoch_tombstones FOR EACH ROW EXECUTE FUNCTION hide()"],
            ["DROP TRIGGER hide ON epoch_tombstones"])


SQLITE_HIDING_TRIGGER = (["CREATE TRIGGER hide AFTER INSERT ON epoch_tombstones WHEN new.attempt > 0 BEGIN "
                          "DELETE FROM epoch_tombstones WHERE length = new.length AND epoch = new.epoch "
                          "AND attempt = new.attempt; END"], ["DROP TRIGGER hide"])


def assert_no_ended_key_outlives(db_path, attacker, location_named, trigger: tuple[list[str], list[str]]) -> None:
    """A row in an epoch, a copy, the trigger planted while the vault runs; gc at the epoch's end (refused, or
    not), the trigger dropped, gc again: no entry of the epoch is left and the copy opens nothing of the row."""
    ring, clock = MemoryKeyring(), FakeClock(T0)
    epoch = int(T0) // E
    plant, drop = trigger
    with Vault.open(db_path, keyring_backend=ring, clock=clock) as vault:
        vault.put(BOB, "t", 1, "x", "bob's row lives in a later epoch", ttl_seconds=2 * 86400)
        row = vault.put(ALICE, "t", 1, "x", "the dentist is on Tuesday", ttl_seconds=600).id
        backup = location_named("backup.db")
        storage.backup(db_path, backup)
        attacker.run(*plant)
        clock.now = (epoch + 1) * E + SKEW
        with contextlib.suppress(IntegrityError):  # refused: the schema is not the vault's
            vault.gc()
        attacker.run(*drop)
        vault.gc()
        clock.now += 10 * E
        vault.gc()
        left = [entry for entry in epoch_entries(ring) if entry.startswith(f"{E}.{epoch}.")]
    clock.now = T0
    with Vault.open(backup, keyring_backend=ring, clock=clock) as copy:
        assert left == [], left
        assert_nothing_of(copy, ALICE, row)


def test_a_trigger_hiding_epoch_tombstones_keeps_no_ended_key(db_path, attacker, location_named):
    trigger = postgres_hiding_trigger() if STORE == "postgres" else SQLITE_HIDING_TRIGGER
    assert_no_ended_key_outlives(db_path, attacker, location_named, trigger)
