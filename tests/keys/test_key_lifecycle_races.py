"""Key-lifecycle races and interruptions: a shred landing inside a rotation, a stale
cache after a shred and re-creation, a keyring write that times out and lands late, a retirement whose
keyring write landed but whose commit did not, and bad progress callbacks."""

from __future__ import annotations

import threading
import time

import pytest
from keyring.backend import KeyringBackend
from keyring.errors import KeyringLocked

from keys.keyring.edge import KeyringEdge
from keys.keyring.secret import Secret
from keys.testing import MemoryKeyring
from tests.support.fault_counts import FaultDouble, Switch
from tests.support.keyring_entries import owner_key_entries
from vault import InvalidArgument, KeyUnavailable, NotFound, Principal, Vault, storage

ALICE = Principal("alice")


class GatedKeyring(MemoryKeyring):
    """A keyring whose writes wait at a gate once it is armed (a slow D-Bus call)."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = False
        self.waiting, self.gate = threading.Event(), threading.Event()

    def set_password(self, service, username, password):
        if self.armed:
            self.waiting.set()
            self.gate.wait(10)
        super().set_password(service, username, password)


KeyringBackend._classes.discard(GatedKeyring)


def owner_entries(ring: MemoryKeyring) -> list[tuple[str, str]]:
    return owner_key_entries(ring.secrets)


def test_a_shred_during_a_rotation_is_not_undone_by_it(db_path):
    ring = GatedKeyring()
    with Vault.open(db_path, keyring_backend=ring) as first, Vault.open(db_path, keyring_backend=ring) as second:
        row = first.put(ALICE, "t", 1, "x", "secret before the shred").id
        ring.armed = True
        rotation = threading.Thread(target=lambda: first.rotate_owner_key("alice"))
        rotation.start()
        assert ring.waiting.wait(10)  # the rotation has read the keyset and is writing it back
        shred = threading.Thread(target=lambda: second.shred_owner("alice"))
        shred.start()
        time.sleep(0.3)  # the shred now waits for the rotation's write lock
        ring.armed = False
        ring.gate.set()
        rotation.join(10)
        shred.join(10)
        assert owner_entries(ring) == []  # the rotation's write did not bring the keys back
        with pytest.raises(NotFound):
            second.get(ALICE, row)


def test_a_rotation_that_timed_out_and_lands_after_a_shred_brings_back_no_key(db_path, location_named):
    """No key comes back after a shred: process 1's rotation hangs on the keyring and gives up; process 2 shreds the
    owner; the hung write lands afterwards. It holds only the one version it was writing, reserved in the file and
    tombstoned since: a backup from before the shred stays unreadable, the owner's next put makes a new version, and
    the late entry is deleted on sight and counted. (Two vaults with their own keyring edges: two processes.)"""
    ring = GatedKeyring()
    with Vault.open(db_path, keyring_backend=ring, keyring_timeout=0.2) as first, \
            Vault.open(db_path, keyring_backend=ring) as second:
        row = first.put(ALICE, "t", 1, "x", "secret before the shred").id
        copy = location_named("before-shred.db")
        storage.backup(db_path, copy)
        ring.armed = True
        with pytest.raises(KeyUnavailable, match="did not answer"):
            first.rotate_owner_key("alice")
        assert ring.waiting.wait(5)
        ring.armed = False
        assert second.shred_owner("alice") == 1
        assert owner_entries(ring) == []
        ring.gate.set()  # the hung write lands now
        deadline = time.monotonic() + 5
        while not owner_entries(ring) and time.monotonic() < deadline:
            time.sleep(0.01)
        ((_, late),) = owner_entries(ring)
        assert late.endswith(".2")  # the version the rotation had reserved: never the destroyed version 1
        with Vault.open(copy, keyring_backend=ring) as old, pytest.raises(KeyUnavailable):
            old.get(ALICE, row)  # the backup's version 1 is gone for good
        fresh = second.put(ALICE, "t", 2, "x", "under a new key").id
        assert [user[-2:] for _, user in owner_entries(ring)] == [".3"]  # the late entry deleted, not adopted
        assert second.stats()["keyring_entries_destroyed_on_sight"] == 1
        assert first.get(ALICE, fresh).content == "under a new key"
        with pytest.raises(NotFound):
            second.get(ALICE, row)
    with Vault.open(copy, keyring_backend=ring) as old, pytest.raises(KeyUnavailable):
        old.get(ALICE, row)


def test_a_stale_cache_after_shred_and_re_creation_neither_wraps_nor_reads_with_the_old_key(db_path):
    ring = MemoryKeyring()
    with Vault.open(db_path, keyring_backend=ring) as stale, Vault.open(db_path, keyring_backend=ring) as other:
        stale.put(ALICE, "t", 1, "x", "cached the keyset")
        other.shred_owner("alice")
        fresh_row = other.put(ALICE, "t", 2, "x", "under alice's new key 2").id  # versions are never reused
        late_row = stale.put(ALICE, "t", 3, "x", "from the stale process").id
        assert other.get(ALICE, late_row).content == "from the stale process"
        assert stale.get(ALICE, fresh_row).content == "under alice's new key 2"
        assert stale.stats()["counters"]["integrity_failures"] == 0


def test_a_timed_out_keyring_write_blocks_further_writes_to_that_entry_until_it_lands():
    ring = GatedKeyring()
    store = KeyringEdge(ring, timeout=0.2)
    ring.armed = True
    with pytest.raises(KeyUnavailable, match="did not answer"):
        store.set("svc", "entry", Secret("first"))
    ring.armed = False
    with pytest.raises(KeyUnavailable, match="has not finished"):
        store.set("svc", "entry", Secret("second"))  # would be overwritten by the late first write
    with pytest.raises(KeyUnavailable, match="has not finished"):
        store.delete("svc", "entry")
    store.set("svc", "other entry", Secret("unaffected"))
    ring.gate.set()
    deadline = time.monotonic() + 5
    while ring.get_password("svc", "entry") != "first" and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)
    store.set("svc", "entry", Secret("second"))
    assert ring.get_password("svc", "entry") == "second"


class RefusingDeletes(MemoryKeyring, FaultDouble):
    """A keyring that refuses every delete while ``refusing`` is set (a locked collection), counting them."""

    refusing = Switch()

    def delete_password(self, service, username):
        if self.refusing:
            self.failed()
            raise KeyringLocked("locked for the test")
        super().delete_password(service, username)


KeyringBackend._classes.discard(RefusingDeletes)


def test_a_retirement_whose_keyring_delete_failed_finishes_on_the_next_one(db_path, attacker):
    """The tombstones commit before the entries are deleted: a failed delete leaves the version destroyed for the
    vault (never loaded or adopted again) and the next retirement deletes its entry."""
    ring = RefusingDeletes()
    with Vault.open(db_path, keyring_backend=ring) as vault:
        row = vault.put(ALICE, "t", 1, "x", "kept").id
        vault.rotate_owner_key("alice")
        vault.rewrap("alice")
        ring.refusing = True
        with pytest.raises(KeyUnavailable):
            vault.retire_old_key_versions("alice")
        assert [user[-2:] for _, user in owner_entries(ring)] == [".1", ".2"]  # the entry is still there
        assert attacker.recorded_key_versions() == {"committed": [2], "tombstoned": [1]}
        assert [f.status for f in storage.describe(db_path) if "run it again" in f.text] == ["WARN"]  # doctor
        ring.refusing = False
        assert vault.retire_old_key_versions("alice") == 0  # nothing left to retire, but the entry goes
        assert [user[-2:] for _, user in owner_entries(ring)] == [".2"]
        assert not [f for f in storage.describe(db_path) if "run it again" in f.text]
        assert vault.get(ALICE, row).content == "kept"
        assert vault.rotate_owner_key("alice") == 3


def test_a_missing_version_that_rows_still_need_is_key_unavailable(db_path, keyring_backend):
    with Vault.open(db_path, keyring_backend=keyring_backend) as vault:
        row = vault.put(ALICE, "t", 1, "x", "needs v1").id
        vault.rotate_owner_key("alice")
    first = owner_entries(keyring_backend)[0]
    assert first[1].endswith(".1")
    del keyring_backend.secrets[first]
    with Vault.open(db_path, keyring_backend=keyring_backend) as vault, pytest.raises(KeyUnavailable):
        vault.get(ALICE, row)


def test_a_progress_that_is_not_callable_is_refused_before_anything_is_destroyed(vault, alice):
    row = vault.put(alice, "t", 1, "x", "kept").id
    for call in (lambda: vault.shred_owner(alice.user_id, progress=42), lambda: vault.gc(progress="x"),
                 lambda: vault.rewrap(progress=object())):
        with pytest.raises(InvalidArgument):
            call()
    assert vault.get(alice, row).content == "kept"
