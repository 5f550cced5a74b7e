"""Key changes racing across hosts on PostgreSQL, where no one write lock serialises them as on SQLite: a rotation
(or a new owner's first key) made on one host while another shreds that owner. The key being made must never
outlive the shred: recorded after it, it wrapped new rows on the first host under a version the shred had destroyed,
every other host then found the owner's rows without keys (KeyUnavailable), and no new key could be made for them."""

from __future__ import annotations

import threading

import pytest
from keyring.backend import KeyringBackend

from keys.testing import MemoryKeyring
from vault import KeyUnavailable, Principal, Vault

pytestmark = pytest.mark.postgres
ALICE = Principal("alice")


class Gated(MemoryKeyring):
    """A shared keyring whose writes of owner keys wait at a gate once it is set (a slow Secret Service)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate: threading.Event | None = None
        self.waiting = threading.Event()

    def set_password(self, service: str, username: str, password: str) -> None:
        if self.gate is not None and service.endswith("/owner-key"):
            self.waiting.set()
            self.gate.wait(8)
        super().set_password(service, username, password)


KeyringBackend._classes.discard(Gated)


def test_a_rotation_racing_a_shred_on_another_host_never_outlives_it(pg_schemas):
    ring, location = Gated(), pg_schemas("hosts")
    with Vault.open(location, keyring_backend=ring) as a, Vault.open(location, keyring_backend=ring) as b:
        a.put(ALICE, "t", 1, "x", "before")
        ring.gate, outcome = threading.Event(), []

        def rotate() -> None:
            try:
                outcome.append(b.rotate_owner_key("alice"))
            except KeyUnavailable as error:
                outcome.append(error)

        thread = threading.Thread(target=rotate)
        thread.start()
        assert ring.waiting.wait(5)  # B reserved version 2 and is writing its keyring entry
        shred = threading.Thread(target=a.shred_owner, args=("alice",))
        shred.start()
        shred.join(1)  # the shred waits for B's key (or, before, ran through)
        ring.gate.set()
        thread.join(20)
        shred.join(20)
        ring.gate = None
        assert not shred.is_alive() and not thread.is_alive()
        if outcome != [2]:  # B's rotation refused: the shred came first
            assert isinstance(outcome[0], KeyUnavailable)
        assert [user for service, user in ring.secrets if service.endswith("/owner-key")] == []  # none outlived it
        after = b.put(ALICE, "t", 2, "x", "after the shred").id  # under a key that survives, read on both hosts
        assert a.read(ALICE, after).content == b.read(ALICE, after).content == "after the shred"
        assert a.put(ALICE, "t", 3, "x", "and a put on A")
