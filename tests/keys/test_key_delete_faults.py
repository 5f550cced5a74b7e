"""A keyring that fails to delete, where the vault really deletes keys: a shred (every owner key version) and a
gc (the keys of ended expiry epochs). Each test asserts that its fault fired: the faulty backend counts the
deletes it refused. A shred that cannot delete is KeyUnavailable with a remedy and leaves the owner unreadable
(its versions are tombstoned first), and completes when run again; a gc collects its rows anyway and destroys
the epoch key on the next run."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from keyring.backend import KeyringBackend
from keyring.errors import KeyringLocked, PasswordDeleteError

from keys.testing import MemoryKeyring
from tests.support.clock import FakeClock
from tests.support.fault_counts import FaultDouble, Switch
from tests.support.keyring_entries import owner_key_entries
from vault import KeyUnavailable, NotFound, Principal, Vault

ALICE, BOB = Principal("alice"), Principal("bob")
ERRORS: dict[str, Callable[[], Exception]] = {
    "locked": lambda: KeyringLocked("collection is locked"),
    "runtime": lambda: RuntimeError("backend down"),
    "refused": lambda: PasswordDeleteError("not deleted"),
}


class RefusingDeletes(MemoryKeyring, FaultDouble):
    """A MemoryKeyring whose deletes raise ``error()`` while ``refusing``, counted in ``failures``."""

    refusing = Switch()

    def __init__(self, error: Callable[[], Exception]) -> None:
        super().__init__()
        self.error = error

    def delete_password(self, service: str, username: str) -> None:
        if self.refusing:
            self.failed()
            raise self.error()
        super().delete_password(service, username)


KeyringBackend._classes.discard(RefusingDeletes)


def epoch_keys(ring: MemoryKeyring) -> list[str]:
    """The user names of the epoch key entries (``<E>.<epoch>.<n>``; the progress markers left out), by epoch."""
    found = [user for service, user in ring.secrets if service.endswith("/epoch-key")]
    return sorted((user for user in found if re.fullmatch(r"\d+\.\d+\.\d+", user)),
                  key=lambda user: int(user.split(".")[1]))


@pytest.mark.parametrize("error", ERRORS.values(), ids=ERRORS.keys())
def test_a_shred_whose_keyring_deletes_fail_leaves_the_owner_unreadable_and_completes_when_run_again(
        error, db_path, clock):
    ring = RefusingDeletes(error)
    with Vault.open(db_path, keyring_backend=ring, clock=clock) as vault:
        row = vault.put(ALICE, "t", 1, "x", "shred me").id
        vault.rotate_owner_key("alice")
        other = vault.put(BOB, "t", 1, "x", "keep me").id
        ring.refusing = True
        with pytest.raises(KeyUnavailable, match="keyring"):
            vault.shred_owner("alice")
        assert ring.failures > 0, "the fault never fired: the shred asked the keyring to delete nothing"
        with pytest.raises((KeyUnavailable, NotFound)):
            vault.get(ALICE, row)
        assert vault.get(BOB, other).content == "keep me"
        ring.refusing = False
        vault.shred_owner("alice")
        with pytest.raises(NotFound):
            vault.get(ALICE, row)
        assert len(owner_key_entries(ring.secrets)) == 1  # bob's only
        assert vault.get(BOB, other).content == "keep me"


@pytest.mark.parametrize("error", ERRORS.values(), ids=ERRORS.keys())
def test_a_gc_whose_epoch_key_deletes_fail_collects_its_rows_and_destroys_the_key_on_the_next_run(error, db_path):
    clock, ring = FakeClock(), RefusingDeletes(error)
    with Vault.open(db_path, keyring_backend=ring, clock=clock, epoch_seconds=60) as vault:
        gone = vault.put(ALICE, "t", 1, "x", "expires", ttl_seconds=60).id
        kept = vault.put(ALICE, "t", 2, "x", "lives on", ttl_seconds=86400).id
        ended, live = epoch_keys(ring)  # the row that expires in one epoch, the other in a later one
        clock.advance(3600)
        ring.refusing = True
        assert vault.gc() == 1
        assert ring.failures > 0, "the fault never fired: gc asked the keyring to delete no epoch key"
        assert epoch_keys(ring) == [ended, live]
        ring.refusing = False
        clock.advance(60)
        vault.gc()
        assert epoch_keys(ring) == [live]
        with pytest.raises(NotFound):
            vault.get(ALICE, gone)
        assert vault.get(ALICE, kept).content == "lives on"
