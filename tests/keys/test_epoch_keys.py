"""The keys of expiry epochs in the keyring (keys/epochs/keys.py; threat_model.md, "Expiry epochs"): one
write-once entry per epoch, reserved in the database first and checked against its commitment; destroyed after the
epoch's end plus the skew allowance, tombstones first, finished after a crash or a keyring fault; never made again
once destroyed (a host whose clock is behind); and a first-use race between two processes ending with one key.
Through a real store (SQLite, or PostgreSQL with SCRATCHVAULT_TEST_STORE=postgres)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from keyring.backend import KeyringBackend

from keys import CacheLimits, KeyManager, KeyringEdge
from keys.epochs.epoch_key import EpochKey, epoch_name
from keys.epochs.marks import MARKER
from keys.keyring.entries import serialize_single_key
from keys.testing import MemoryKeyring
from tests.support.fault_counts import FaultDouble, Switch
from tests.support.file_keyring import FileKeyring, load
from tests.support.repository import calling, child_env
from vault import InvalidArgument, KeyUnavailable, storage

VAULT_ID = bytes(range(16))
SERVICE = f"scratchvault/{VAULT_ID.hex()}/epoch-key"
E = 3600
NUMBER = 500_001  # the epoch from 1,800,003,600 to 1,800,007,200
EPOCH = (E, NUMBER)
START, END = NUMBER * E, (NUMBER + 1) * E
SKEW = 300
CHILD = calling("tests.keys.test_epoch_keys.child_main")


class FaultyKeyring(MemoryKeyring, FaultDouble):
    """A keyring whose deletes or writes fail while told to (a locked or broken Secret Service), counting them."""

    refuse_deletes = Switch()
    refuse_writes = Switch()

    def delete_password(self, service, username):
        if self.refuse_deletes:
            self.failed()
            raise OSError("the Secret Service is gone")
        super().delete_password(service, username)

    def set_password(self, service, username, password):
        if self.refuse_writes:
            self.failed()
            raise OSError("the Secret Service is gone")
        super().set_password(service, username, password)


KeyringBackend._classes.discard(FaultyKeyring)


def epochs_of(store, ring, **settings):
    """The epoch keys of one process: its own manager (and cache) over the shared database and keyring."""
    return KeyManager(KeyringEdge(ring, timeout=5), VAULT_ID, store.commitments, cache=CacheLimits(60, 64),
                      epoch_skew_seconds=SKEW, **settings).epochs


def epoch_entries(ring: MemoryKeyring) -> list[str]:
    """The keyring's epoch key entries (not the "destroyed through" and "probed through" markers beside them,
    keys/epochs/marks.py)."""
    return sorted(user for service, user in ring.secrets if service == SERVICE and not user.endswith("-through"))


def markers(ring: MemoryKeyring) -> dict[str, str]:
    return {user: secret for (service, user), secret in ring.secrets.items() if user.endswith(MARKER)}


def commitment(key: EpochKey) -> bytes:
    return key.commitment(VAULT_ID, *EPOCH)


def test_first_use_writes_one_entry_which_another_process_loads_and_checks(stores):
    ring = MemoryKeyring()
    first, second = epochs_of(stores(), ring), epochs_of(stores(), ring)
    assert first.get(EPOCH) is None
    made = first.get_or_create(EPOCH, START + 10)
    assert epoch_entries(ring) == [f"{E}.{NUMBER}.1"] and first.get_or_create(EPOCH, START + 20) is made
    assert commitment(second.get_or_create(EPOCH, START + 30)) == commitment(made)
    assert commitment(second.get(EPOCH)) == commitment(made) and epoch_entries(ring) == [f"{E}.{NUMBER}.1"]
    assert first.epoch_of_expiry(START + 3599.9) == EPOCH and first.epoch_of_expiry(END) == (E, NUMBER + 1)


def test_an_entry_replaced_or_removed_in_the_keyring_is_key_unavailable_not_a_new_key(stores):
    ring = MemoryKeyring()
    epochs_of(stores(), ring).get_or_create(EPOCH, START)
    ring.secrets[(SERVICE, f"{E}.{NUMBER}.1")] = serialize_single_key(os.urandom(32)).reveal()
    with pytest.raises(KeyUnavailable, match="different key"):
        epochs_of(stores(), ring).get_or_create(EPOCH, START)
    del ring.secrets[(SERVICE, f"{E}.{NUMBER}.1")]
    with pytest.raises(KeyUnavailable, match="missing"):
        epochs_of(stores(), ring).get(EPOCH)
    assert epoch_entries(ring) == []


def test_an_epoch_that_has_ended_gets_no_key(stores):
    epochs = epochs_of(stores(), MemoryKeyring())
    with pytest.raises(InvalidArgument, match="ended"):
        epochs.get_or_create(EPOCH, END)
    epochs.get_or_create(EPOCH, END - 1)


def test_a_key_is_destroyed_once_its_epoch_and_the_skew_allowance_are_over_and_never_made_again(stores):
    ring = MemoryKeyring()
    epochs, behind = epochs_of(stores(), ring), epochs_of(stores(), ring)
    epochs.get_or_create(EPOCH, START)
    later = epochs.get_or_create((E, NUMBER + 1), START)
    assert behind.get(EPOCH) is not None  # cached in the other process too
    assert epochs.destroy_ended(END + SKEW - 1).destroyed == []  # a host up to the allowance behind may still put
    assert epochs.destroy_ended(END + SKEW).destroyed == [EPOCH]
    assert epoch_entries(ring) == [f"{E}.{NUMBER + 1}.1"] and epochs.get(EPOCH) is None
    with pytest.raises(InvalidArgument, match="destroyed"):
        epochs_of(stores(), ring).get_or_create(EPOCH, START + 1)  # a host whose clock is an hour behind
    assert commitment(epochs.get((E, NUMBER + 1))) == later.commitment(VAULT_ID, *EPOCH)
    assert epochs.destroy_ended(END + E + SKEW).destroyed == [(E, NUMBER + 1)] and epoch_entries(ring) == []


def test_a_keyring_that_refuses_the_delete_leaves_the_epoch_overdue_and_the_next_destruction_finishes(stores):
    ring = FaultyKeyring()
    epochs = epochs_of(stores(), ring)
    epochs.get_or_create(EPOCH, START)
    assert epochs.overdue(END + SKEW) == [EPOCH]  # no gc ran
    ring.refuse_deletes = True
    done = epochs.destroy_ended(END + SKEW)
    assert done.destroyed == [EPOCH] and done.pending == [(E, NUMBER, 1)]
    assert epochs.get(EPOCH) is None and epochs_of(stores(), ring).get(EPOCH) is None  # tombstoned: never used
    assert epoch_entries(ring) == [f"{E}.{NUMBER}.1"] and epochs.overdue(END + SKEW) == [EPOCH]
    ring.refuse_deletes = False
    done = epochs.destroy_ended(END + SKEW + 60)
    assert done.destroyed == [] and done.pending == [] and epoch_entries(ring) == [] and epochs.overdue(END + E) == []


def test_a_crash_between_the_tombstones_and_the_keyring_delete_is_finished_by_the_next_destruction(stores):
    ring, store = MemoryKeyring(), stores()
    epochs_of(store, ring).get_or_create(EPOCH, START)
    assert store.commitments.close_epochs(END) == [EPOCH]  # committed; the process died before the delete
    assert epoch_entries(ring) == [f"{E}.{NUMBER}.1"]
    assert epochs_of(stores(), ring).destroy_ended(END + SKEW).destroyed == [] and epoch_entries(ring) == []


def test_a_failed_write_tombstones_its_attempt_and_its_late_landing_is_swept(stores):
    ring, store = FaultyKeyring(), stores()
    epochs = epochs_of(store, ring)
    ring.refuse_writes = True
    with pytest.raises(KeyUnavailable):
        epochs.get_or_create(EPOCH, START)
    ring.refuse_writes = False
    assert store.commitments.epoch_tombstones(unswept_only=True) == [(E, NUMBER, 1, False)]
    ring.set_password(SERVICE, f"{E}.{NUMBER}.1", serialize_single_key(os.urandom(32)).reveal())  # lands late
    key = epochs.get_or_create(EPOCH, START)
    assert store.commitments.epoch_commitment(*EPOCH)[0] == 2 and commitment(key) == commitment(epochs.get(EPOCH))
    # before the epoch ends no entry that exists is deleted (the database alone cannot tell a late landing from a
    # live key whose records a writer deleted); once it has ended (plus the allowance) the late landing goes
    assert epochs.sweep(START) == [] and epoch_entries(ring) == [f"{E}.{NUMBER}.1", f"{E}.{NUMBER}.2"]
    assert epochs.sweep(END + SKEW) == [] and epoch_entries(ring) == [f"{E}.{NUMBER}.2"]


def test_an_entry_already_under_a_reserved_attempt_is_left_counted_and_never_adopted_or_overwritten(stores):
    """It may be the key live rows use, its records deleted by a writer of the database: the attempt is given up
    and the next one written; the entry goes with the epoch."""
    ring, store = MemoryKeyring(), stores()
    planted = serialize_single_key(os.urandom(32))
    ring.set_password(SERVICE, epoch_name(E, NUMBER, 1), planted.reveal())
    epochs = epochs_of(store, ring)
    key = epochs.get_or_create(EPOCH, START)
    assert epochs.destroyed_on_sight == 1 and ring.secrets[(SERVICE, f"{E}.{NUMBER}.1")] == planted.reveal()
    assert store.commitments.epoch_commitment(*EPOCH)[0] == 2 and commitment(key) == commitment(epochs.get(EPOCH))
    assert epochs.destroy_ended(END + SKEW).destroyed == [EPOCH] and epoch_entries(ring) == []


def test_at_steady_state_the_keyring_holds_lifetime_over_length_plus_one_entries(stores):
    ring = MemoryKeyring()
    epochs = epochs_of(stores(), ring)
    for hour in range(48):  # a put an hour (10 minutes past), each expiring 3 h later, gc after each
        now = START + hour * E + 600
        epochs.get_or_create(epochs.epoch_of_expiry(now + 3 * E), now)
        epochs.destroy_ended(now)
        assert len(epoch_entries(ring)) == min(hour + 1, 3 + 1)  # the epochs rows still expire in
    assert epochs.destroy_ended(START + 52 * E + SKEW).destroyed and epoch_entries(ring) == []
    assert list(markers(ring)) == [f"{E}.destroyed-through"]  # and one marker beside them


def child_main() -> None:
    """argv: db keyring go-dir name: reserve an attempt, wait until both children hold one, then make the key;
    prints the recorded commitment's hex."""
    db, keyring_file, go, name = sys.argv[1:]
    store = storage.open_store(db)
    epochs = epochs_of(store, FileKeyring(keyring_file))
    records, reserve = store.commitments, store.commitments.reserve_epoch

    def reserve_then_wait(*args):
        attempt = reserve(*args)
        Path(go, name).touch()
        deadline = time.monotonic() + 20
        while len(os.listdir(go)) < 2 and time.monotonic() < deadline:
            time.sleep(0.005)
        return attempt

    records.reserve_epoch = reserve_then_wait  # both hold a reservation before either takes the key lock
    print(commitment(epochs.get_or_create(EPOCH, START)).hex(), flush=True)
    store.close()


def test_two_processes_racing_to_make_an_epochs_first_key_end_with_one(stores, db_path, tmp_path):
    store, keyring_file, go = stores(), tmp_path / "keyring.json", tmp_path / "go"
    go.mkdir()
    children = [subprocess.Popen([sys.executable, "-c", CHILD, str(db_path), str(keyring_file), str(go), name],
                                 stdout=subprocess.PIPE, text=True, env=child_env()) for name in ("a", "b")]
    outputs = [child.communicate(timeout=60)[0].strip() for child in children]
    assert [child.returncode for child in children] == [0, 0]
    assert outputs[0] == outputs[1] and sorted(os.listdir(go)) == ["a", "b"]
    names = [key.split("\0")[1] for key in load(keyring_file) if key.startswith(SERVICE + "\0")
             and not key.endswith("-through")]
    assert len(names) == 1 and store.commitments.epoch_commitment(*EPOCH)[0] == int(names[0].rsplit(".", 1)[1])
    assert [attempt for _, _, attempt, _ in store.commitments.epoch_tombstones(unswept_only=True)] == \
        [3 - int(names[0].rsplit(".", 1)[1])]  # the loser's attempt, never written
    assert commitment(epochs_of(store, FileKeyring(keyring_file)).get(EPOCH)).hex() == outputs[0]
