"""The destruction side of the expiry epochs' keys (keys/epochs/keys.py: ``EpochKeys.destroy_ended``, its probe of
every length the vault made keys for, ``sweep``, the count of entries destroyed on sight, the pickling refusal;
threat_model.md, "Expiry epochs"), through a real store: each length probed as far as its keys were made and no
further, the "destroyed through" marker raised exactly to the epoch below the first entry the keyring failed to
delete (never past it: the next probe must look there again), the probe's cursor moved on past it so later epochs
are still probed, and every marker checked by its exact value. An epoch left unprobed keeps a key that should be
gone; a marker past an entry still there hides it from every later probe. On either store (a writer of the
database edits rows with ``attacker.run``)."""

from __future__ import annotations

import copy
import os
import pickle

import pytest
from keyring.backend import KeyringBackend

from keys import CacheLimits, KeyringEdge
from keys.epochs.keys import EpochKeys
from keys.keyring.entries import serialize_single_key
from keys.testing import MemoryKeyring
from tests.keys.test_epoch_keys import END, EPOCH, NUMBER, SERVICE, SKEW, START, VAULT_ID, E, epoch_entries
from tests.support.fault_counts import FaultDouble, Switch
from vault.storage import Store

SHORT = 600  # a length the operator used before going back to the default
SHORT_NUMBER = START // SHORT  # the short epoch from START to START + 600, the first of NUMBER's six
LENGTHS = ("scratchvault/" + VAULT_ID.hex() + "/epoch-lengths", "lengths")


class StuckKeyring(MemoryKeyring, FaultDouble):
    """A keyring that fails to delete the entries named in ``stuck`` (a Secret Service that refuses one item),
    counting each refusal."""

    stuck = Switch()

    def delete_password(self, service: str, username: str) -> None:
        if self.stuck and username in self.stuck:
            self.failed()
            raise OSError("the Secret Service refused the delete")
        super().delete_password(service, username)


KeyringBackend._classes.discard(StuckKeyring)


def keys_of(store: Store, ring: MemoryKeyring, length: int = E) -> EpochKeys:
    """One process's epoch keys of ``length`` over the shared database and keyring."""
    return EpochKeys(KeyringEdge(ring, timeout=5), VAULT_ID, store.commitments, cache=CacheLimits(60, 64),
                     length=length, skew=SKEW)


def through(ring: MemoryKeyring) -> dict[str, int]:
    """Every marker of the epoch keys' service (destroyed, probed and made through), by user name."""
    return {user: int(value) for (service, user), value in ring.secrets.items()
            if service == SERVICE and user.endswith("-through")}


def unlisted() -> str:
    """A key's entry whose every record a writer of the database removed (the probe only asks whether it is there)."""
    return serialize_single_key(os.urandom(32)).reveal()


def test_a_destruction_probes_the_old_length_up_to_its_last_key_and_reports_what_both_lengths_found(stores):
    ring = MemoryKeyring()
    old, new = keys_of(stores(), ring, SHORT), keys_of(stores(), ring)
    old.get_or_create((SHORT, SHORT_NUMBER), START)
    new.get_or_create(EPOCH, START)
    ring.secrets[(SERVICE, f"{SHORT}.{SHORT_NUMBER}.2")] = unlisted()
    ring.secrets[(SERVICE, f"{E}.{NUMBER}.2")] = unlisted()
    assert through(ring) == {f"{SHORT}.destroyed-through": SHORT_NUMBER - 2, f"{SHORT}.made-through": SHORT_NUMBER,
                             f"{E}.destroyed-through": NUMBER - 2, f"{E}.made-through": NUMBER}
    done = new.destroy_ended(END + SKEW)  # five more short epochs have ended: none ever had a key
    assert done.found_unlisted == [(E, NUMBER, 2), (SHORT, SHORT_NUMBER, 2)]
    assert done.destroyed == [(SHORT, SHORT_NUMBER), EPOCH] and done.pending == [] and epoch_entries(ring) == []
    assert through(ring) == {f"{SHORT}.destroyed-through": SHORT_NUMBER, f"{SHORT}.made-through": SHORT_NUMBER,
                             f"{E}.destroyed-through": NUMBER, f"{E}.made-through": NUMBER}


def test_a_destroyed_epoch_of_a_length_the_keyring_no_longer_lists_still_raises_that_lengths_marker(stores):
    ring = MemoryKeyring()
    keys_of(stores(), ring, SHORT).get_or_create((SHORT, SHORT_NUMBER), START)
    new = keys_of(stores(), ring)
    new.get_or_create(EPOCH, START)
    del ring.secrets[LENGTHS]  # the keyring lost the list of lengths: only the database names the short epoch
    done = new.destroy_ended(END + SKEW)
    assert done.destroyed == [(SHORT, SHORT_NUMBER), EPOCH] and epoch_entries(ring) == []
    assert through(ring) == {f"{SHORT}.destroyed-through": SHORT_NUMBER, f"{SHORT}.made-through": SHORT_NUMBER,
                             f"{E}.destroyed-through": NUMBER, f"{E}.made-through": NUMBER}


def test_an_entry_the_keyring_fails_to_delete_holds_the_marker_just_below_it_and_the_cursor_moves_on(stores):
    ring = StuckKeyring()
    epochs = keys_of(stores(), ring)
    for number in (NUMBER, NUMBER + 1, NUMBER + 2):
        epochs.get_or_create((E, number), START)
    ring.stuck = {f"{E}.{NUMBER}.1"}
    done = epochs.destroy_ended(START + 3 * E + SKEW)
    assert done.destroyed == [(E, NUMBER), (E, NUMBER + 1), (E, NUMBER + 2)] and done.pending == [(E, NUMBER, 1)]
    assert epoch_entries(ring) == [f"{E}.{NUMBER}.1"]
    assert through(ring) == {f"{E}.destroyed-through": NUMBER - 1, f"{E}.probed-through": NUMBER + 2,
                             f"{E}.made-through": NUMBER + 2}


def test_an_entry_left_by_a_failed_delete_is_found_again_after_a_writer_marks_its_tombstone_swept(stores, attacker):
    ring = StuckKeyring()
    epochs = keys_of(stores(), ring)
    for number in (NUMBER, NUMBER + 1, NUMBER + 2):
        epochs.get_or_create((E, number), START)
    ring.stuck = {f"{E}.{NUMBER}.1"}
    assert epochs.destroy_ended(START + 3 * E + SKEW).pending == [(E, NUMBER, 1)]
    ring.stuck = set()
    attacker.run(("UPDATE epoch_tombstones SET swept = ? WHERE length = ? AND epoch = ? AND attempt = 1", True, E,
                  NUMBER))
    done = epochs.destroy_ended(START + 3 * E + SKEW)  # the sweep no longer lists it: only the probe can find it
    assert done.found_unlisted == [(E, NUMBER, 1)] and done.pending == [] and epoch_entries(ring) == []


def test_a_stuck_entry_does_not_keep_the_probe_from_reaching_epochs_past_one_batch(stores):
    ring = StuckKeyring()
    epochs = keys_of(stores(), ring)
    epochs.get_or_create(EPOCH, START)
    ring.secrets[(SERVICE, f"{E}.{NUMBER + 60}.1")] = unlisted()
    ring.stuck = {f"{E}.{NUMBER}.1"}
    now = (NUMBER + 101) * E + SKEW  # a hundred epochs ended since the last destruction
    first = epochs.destroy_ended(now)  # probes one batch (48 epochs) from NUMBER - 1
    assert first.found_unlisted == [] and first.pending == [(E, NUMBER, 1)]
    assert through(ring) == {f"{E}.destroyed-through": NUMBER - 1, f"{E}.probed-through": NUMBER + 46,
                             f"{E}.made-through": NUMBER}
    second = epochs.destroy_ended(now)  # the stuck epoch's batch again, then the next one past the cursor
    assert second.found_unlisted == [(E, NUMBER + 60, 1)] and second.pending == [(E, NUMBER, 1)]
    assert epoch_entries(ring) == [f"{E}.{NUMBER}.1"] and through(ring)[f"{E}.probed-through"] == NUMBER + 94


def test_a_sweep_without_a_time_deletes_what_ended_by_the_clock_and_keeps_what_has_not(stores):
    ring, store = MemoryKeyring(), stores()
    epochs, far = keys_of(store, ring), 10**6  # epoch 100 ended in 1970; epoch 10**6 ends in 2084
    epochs.get_or_create((E, 100), 100 * E)
    epochs.get_or_create((E, far), 100 * E)
    assert store.commitments.close_epochs(101 * E) == [(E, 100)]  # tombstoned; the process died before the delete
    ring.secrets[(SERVICE, f"{E}.{far}.2")] = unlisted()  # a spare attempt of a live epoch, tombstoned
    store.commitments.tombstone_epoch_attempt(E, far, 2)
    assert epochs.sweep() == []
    assert epoch_entries(ring) == [f"{E}.{far}.1", f"{E}.{far}.2"]


def test_entries_found_where_attempts_were_about_to_write_are_counted_across_calls(stores):
    ring = MemoryKeyring()
    epochs = keys_of(stores(), ring)
    for number in (NUMBER, NUMBER + 1):
        ring.secrets[(SERVICE, f"{E}.{number}.1")] = unlisted()
        epochs.get_or_create((E, number), START)  # attempt 1 is given up, attempt 2 written
    assert epochs.destroyed_on_sight == 2
    assert epoch_entries(ring) == [f"{E}.{NUMBER}.1", f"{E}.{NUMBER}.2", f"{E}.{NUMBER + 1}.1", f"{E}.{NUMBER + 1}.2"]


def test_epoch_keys_refuse_pickling_and_copying_with_the_exact_text(stores):
    epochs = keys_of(stores(), MemoryKeyring())
    epochs.get_or_create(EPOCH, START)
    refusals = [lambda: copy.copy(epochs), lambda: copy.deepcopy(epochs)]
    refusals += [lambda protocol=protocol: pickle.dumps(epochs, protocol)
                 for protocol in range(pickle.HIGHEST_PROTOCOL + 1)]
    for refused in refusals:
        with pytest.raises(TypeError) as caught:
            refused()
        assert str(caught.value) == "key material cannot be pickled"
