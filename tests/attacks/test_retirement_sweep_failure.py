"""A retirement whose keyring delete failed once leaves the retired key's tombstone as its only record in the
database; a writer who then deletes the tombstone must not keep the key alive: the keyring's own retired-below
mark says which versions must go, whatever the database says."""

from __future__ import annotations

import pytest

from keys.testing import MemoryKeyring
from tests.support.fault_counts import FaultDouble, Switch
from tests.support.keyring_entries import owner_key_entries
from vault import KeyUnavailable, Principal, Vault, VaultError, storage

ALICE = Principal("alice")


class FailsOneDelete(MemoryKeyring, FaultDouble):
    """A keyring whose next delete fails once ``fail_next`` is set (locked, timed out)."""

    fail_next = Switch()

    def delete_password(self, service, username):
        if self.fail_next:
            self.fail_next = False
            self.failed()
            raise RuntimeError("the keyring is locked")
        super().delete_password(service, username)


def test_a_retirement_whose_sweep_failed_destroys_the_key_though_a_writer_deletes_its_tombstone(
        db_path, attacker, location_named):
    ring = FailsOneDelete()
    with Vault.open(db_path, keyring_backend=ring) as vault:
        row = vault.put(ALICE, "t", 1, "x", "old secret").id
        copy = location_named("backup.db")
        storage.backup(db_path, copy)
        vault.rotate_owner_key("alice")
        vault.rewrap("alice")
        ring.fail_next = True
        with pytest.raises(VaultError):
            vault.retire_old_key_versions("alice")  # tombstone committed, the entry's delete failed
        attacker.run("DELETE FROM key_tombstones")  # the only record that version 1 must still go
        vault.retire_old_key_versions("alice")  # a rerun, and the daily maintain: both report success
        vault.maintain_keys()
        left = sorted(user.rsplit(".", 1)[1] for _, user in owner_key_entries(ring.secrets))
    with Vault.open(copy, keyring_backend=ring) as old:
        assert "1" not in left, left
        with pytest.raises(KeyUnavailable):
            old.get(ALICE, row)
