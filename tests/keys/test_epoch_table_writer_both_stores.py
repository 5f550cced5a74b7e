"""A writer of the epoch tables, on both stores: the SQLite file's writer and the PostgreSQL role with SQL access
make the same edits (``attacker.run``: rows planted, deleted or rewritten in epoch_keys, epoch_reservations and
epoch_tombstones, and a trigger that drops inserts), and the vault's epoch keys hold the same way on each
(threat_model.md, "Expiry epochs"): no key is used unrecorded, none survives its epoch, no live one is swept."""

from __future__ import annotations

import pytest

from keys.testing import MemoryKeyring
from tests.attacks.stores import STORE
from tests.keys.test_epoch_keys import END, EPOCH, NUMBER, SKEW, START, E, commitment, epoch_entries, epochs_of
from vault import InvalidArgument, KeyUnavailable, VaultError

# a trigger that makes every insert into epoch_keys vanish, as each store spells it
DROPPING_TRIGGER = {
    "sqlite": ["CREATE TRIGGER drop_it BEFORE INSERT ON epoch_keys BEGIN SELECT RAISE(IGNORE); END"],
    "postgres": ["CREATE FUNCTION drop_it() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NULL; END$$",
                 "CREATE TRIGGER drop_it BEFORE INSERT ON epoch_keys FOR EACH ROW EXECUTE FUNCTION drop_it()"],
}
UNDO_TRIGGER = {"sqlite": ["DROP TRIGGER drop_it"],
                "postgres": ["DROP TRIGGER drop_it ON epoch_keys", "DROP FUNCTION drop_it()"]}


def tombstone(attempt: int, swept: bool) -> tuple:
    return ("INSERT INTO epoch_tombstones VALUES (?, ?, ?, ?, ?)", E, NUMBER, attempt, b"", swept)


def drop_the_first_record(stores, attacker, ring):
    """A get_or_create while the trigger drops the key record it writes: KeyUnavailable, then the trigger goes.
    Returns the store."""
    store = stores()
    store.commitments.live_epochs()  # the schema exists
    attacker.run(*DROPPING_TRIGGER[STORE])
    with pytest.raises(KeyUnavailable, match="did not record"):
        epochs_of(store, ring).get_or_create(EPOCH, START)
    attacker.run(*UNDO_TRIGGER[STORE])
    return store


def test_a_record_the_database_silently_drops_is_read_back_and_its_key_never_used(stores, attacker):
    ring = MemoryKeyring()
    store = drop_the_first_record(stores, attacker, ring)
    epochs = epochs_of(store, ring)
    used = epochs.get_or_create(EPOCH, START)
    assert commitment(used) == store.commitments.epoch_commitment(*EPOCH)[1]
    assert attacker.query("SELECT attempt FROM epoch_keys") == [(2,)], "the key whose record was dropped is in use"
    assert epochs.destroy_ended(END + SKEW).pending == [] and epoch_entries(ring) == []


def test_no_tombstone_is_written_through_a_planted_trigger_and_the_entry_goes_when_its_epoch_ends(stores, attacker):
    """The attempt whose record was dropped is not tombstoned while the trigger stands (a write on a table the
    vault did not make as it stands is refused, on both stores); gc's probe of the ended epoch destroys it."""
    ring = MemoryKeyring()
    store = drop_the_first_record(stores, attacker, ring)
    assert store.commitments.epoch_tombstones(unswept_only=True) == []
    assert epoch_entries(ring) == [f"{E}.{NUMBER}.1"]
    done = epochs_of(store, ring).destroy_ended(END + SKEW)
    assert epoch_entries(ring) == [], done


def test_an_entry_whose_key_record_was_deleted_is_found_and_destroyed_when_its_epoch_ends(stores, attacker):
    ring, store = MemoryKeyring(), stores()
    epochs = epochs_of(store, ring)
    epochs.get_or_create(EPOCH, START)
    attacker.run("DELETE FROM epoch_keys", "DELETE FROM epoch_reservations")
    assert epochs.destroy_ended(END + SKEW - 1).found_unlisted == []  # not ended yet: not looked for
    done = epochs.destroy_ended(END + SKEW)
    assert done.found_unlisted == [(E, NUMBER, 1)] and done.pending == [] and epoch_entries(ring) == []
    assert epochs.overdue(END + SKEW) == [] and epochs.get(EPOCH) is None
    with pytest.raises(InvalidArgument, match="destroyed"):  # closed for good, as a listed epoch would be
        epochs_of(stores(), ring).get_or_create(EPOCH, START + 1)


def test_a_tombstone_planted_for_a_live_epochs_key_is_refused_and_reported_not_swept(stores, attacker):
    ring, store = MemoryKeyring(), stores()
    epochs = epochs_of(store, ring)
    epochs.get_or_create(EPOCH, START)
    attacker.run(tombstone(1, False))
    done = epochs.destroy_ended(START + 60)  # the epoch has 59 minutes to run
    assert epoch_entries(ring) == [f"{E}.{NUMBER}.1"], "a live epoch's key was deleted from the keyring"
    assert done.refused == [(E, NUMBER, 1)] and epochs.sweep(START + 60) == []
    assert epochs.destroy_ended(END + SKEW).refused == [] and epoch_entries(ring) == []  # ended: it goes


def test_an_attempt_number_at_the_top_of_the_range_raises_only_a_vault_error(stores, attacker):
    ring, store = MemoryKeyring(), stores()
    store.commitments.live_epochs()
    attacker.run(("INSERT INTO epoch_reservations VALUES (?, ?, ?, ?)", E, NUMBER, 2**63 - 1, 0))
    with pytest.raises(VaultError):
        epochs_of(store, ring).get_or_create(EPOCH, START)
    assert epoch_entries(ring) == []


@pytest.mark.parametrize("rewrite", ["DELETE FROM epoch_keys", "UPDATE epoch_keys SET attempt = 9"])
def test_a_live_epochs_key_record_removed_or_moved_and_its_key_tombstoned_is_not_swept_before_the_end(
        stores, attacker, rewrite):
    ring, store = MemoryKeyring(), stores()
    epochs_of(store, ring).get_or_create(EPOCH, START)
    attacker.run(rewrite, tombstone(1, False))
    epochs = epochs_of(stores(), ring)  # no cache: the database no longer shows a working key beside attempt 1
    assert epochs.sweep(START + 60) == [] and epoch_entries(ring) == [f"{E}.{NUMBER}.1"]
    assert epochs.destroy_ended(END + SKEW).pending == [] and epoch_entries(ring) == []
