"""Erasure is done when the call returns: the keyring itself is asked, right after a retirement, a shred or the gc
that ends an epoch returns and before any other operation, for the entries that call destroyed (and, for a
retirement, for the mark that keeps every version below it from being written again), on each keyring
backend the vault runs on here (the in-memory one, and the OS keyring's Secret Service under scripts/run). The
entries are named as the vault names them (its id, the owner tag, the version, the epoch)."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
from keyring.backend import KeyringBackend

from keys.testing import MemoryKeyring
from tests.support.clock import FakeClock
from tests.support.epochs import SKEW, E
from tests.support.keyring_entries import owner_username
from vault import Principal, Vault

BACKENDS: dict[str, Callable[[pytest.FixtureRequest], KeyringBackend]] = {
    "memory": lambda request: MemoryKeyring(),
    "secret service": lambda request: request.getfixturevalue("real_keyring"),
    "openbao": lambda request: request.getfixturevalue("openbao_keyring"),
}


@pytest.fixture(params=[pytest.param("memory"), pytest.param("secret service", marks=pytest.mark.real_keyring),
                        pytest.param("openbao")])
def ring(request: pytest.FixtureRequest) -> KeyringBackend:
    return BACKENDS[request.param](request)


class Entries:
    """The keyring entries of one vault, by the names the vault gives them; for OpenBao, read in the server with
    the root token (its ``secrets``), not through the backend under test."""

    def __init__(self, ring: KeyringBackend, attacker) -> None:
        vault_id = attacker.meta("vault_id")
        self.ring, self.base = ring, f"scratchvault/{bytes(vault_id).hex()}"
        server = getattr(ring, "secrets", None) if ring.__class__.__name__ == "ObservedOpenBaoKeyring" else None
        self.read = (lambda service, user: server.get((service, user))) if server is not None else ring.get_password

    def owner_key(self, user_id: str, version: int) -> str | None:
        user = owner_username(self.read, f"{self.base}/index", user_id, version)
        return self.read(f"{self.base}/owner-key", user)

    def retired_mark(self, user_id: str) -> str | None:
        """The keyring's own record that every version of the owner below it is retired."""
        owner_tag_hex = owner_username(self.read, f"{self.base}/index", user_id).rsplit(".", 1)[0]
        return self.read(f"{self.base}/owner-retired", owner_tag_hex)

    def epoch_key(self, expires_at: float) -> str | None:
        return self.read(f"{self.base}/epoch-key", f"{E}.{int(expires_at) // E}.1")


def test_a_retirement_and_a_shred_have_deleted_their_entries_when_they_return(ring, db_path, attacker):
    user = Principal(f"erasure-{uuid.uuid4().hex}")
    with Vault.open(db_path, keyring_backend=ring) as vault:
        vault.put(user, "t", 1, "x", "retire then shred")
        entries = Entries(ring, attacker)
        vault.rotate_owner_key(user.user_id)
        vault.rewrap(user.user_id)
        assert entries.owner_key(user.user_id, 1) is not None and entries.owner_key(user.user_id, 2) is not None
        assert vault.retire_old_key_versions(user.user_id) == 1
        assert entries.owner_key(user.user_id, 1) is None, "a retired version's key is still in the keyring"
        assert entries.retired_mark(user.user_id) == "2", "the keyring does not record that version 1 is retired"
        assert entries.owner_key(user.user_id, 2) is not None
        vault.shred_owner(user.user_id)
        assert entries.owner_key(user.user_id, 2) is None, "a shredded owner's key is still in the keyring"


def test_the_gc_that_ends_an_epoch_has_deleted_its_key_when_it_returns(ring, db_path, attacker):
    user, clock = Principal(f"erasure-{uuid.uuid4().hex}"), FakeClock()
    with Vault.open(db_path, keyring_backend=ring, clock=clock) as vault:
        expires_at = vault.put(user, "t", 1, "x", "expires", ttl_seconds=60).expires_at
        entries = Entries(ring, attacker)
        assert entries.epoch_key(expires_at) is not None
        clock.advance(E + SKEW + 60)
        vault.gc()
        assert entries.epoch_key(expires_at) is None, "an ended epoch's key is still in the keyring"
        vault.shred_owner(user.user_id)  # leave nothing of the test's in the OS keyring
