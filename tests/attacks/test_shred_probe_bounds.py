"""What a shred looks for in the keyring is bounded by the keyring: one planted row (a tombstone or a reservation
at a huge version) must neither make a shred ask for a name per version below it under the write lock, nor push the
keyring's issued mark to the top of the range (which would make every later shred do the same)."""

from __future__ import annotations

import pytest

from keys import MAX_KEY_VERSION
from keys.keyring.owner_marks import ALWAYS_PROBED, PROBE_GAP
from keys.testing import MemoryKeyring
from tests.support.keyring_entries import owner_key_entries
from vault import KeyUnavailable, Principal, Vault

ALICE, BOB = Principal("alice"), Principal("bob")
PLANTED = 20_000  # a writer may plant up to MAX_KEY_VERSION


def _alice_tag(ring: MemoryKeyring, bob: set[tuple[str, str]]) -> bytes:
    return bytes.fromhex(next(user for service, user in owner_key_entries(ring.secrets)
                              if (service, user) not in bob).split(".")[0])


def test_a_planted_tombstone_far_up_costs_a_shred_one_keyring_read_not_one_per_version_below_it(db_path, attacker):
    ring = MemoryKeyring()
    asked: list[tuple[str, str]] = []
    with Vault.open(db_path, keyring_backend=ring) as vault:
        vault.put(BOB, "t", 1, "x", "bob stays")
        bob = set(owner_key_entries(ring.secrets))
        vault.put(ALICE, "t", 1, "x", "first")
        attacker.run(("INSERT INTO key_tombstones (owner_tag, version, check_value, swept) VALUES (?, ?, ?, ?)",
                      _alice_tag(ring, bob), PLANTED, b"", True))
        get = ring.get_password
        ring.get_password = lambda service, user: (asked.append((service, user)), get(service, user))[1]
        vault.shred_owner("alice")
    owner_key_reads = [user for service, user in asked if service.endswith("/owner-key")]
    assert len(owner_key_reads) < 4 * (ALWAYS_PROBED + PROBE_GAP), len(owner_key_reads)
    assert sum(user.endswith(f".{PLANTED}") for user in owner_key_reads) >= 1  # named, and asked for by name


def test_a_planted_reservation_at_the_top_never_raises_the_keyrings_issued_mark(db_path, attacker):
    ring = MemoryKeyring()
    with Vault.open(db_path, keyring_backend=ring) as vault:
        vault.put(ALICE, "t", 1, "x", "first")
        tag = bytes.fromhex(owner_key_entries(ring.secrets)[0][1].split(".")[0])
        attacker.run(("INSERT INTO key_reservations (owner_tag, version, reserved_at) VALUES (?, ?, ?)",
                      tag, MAX_KEY_VERSION - 1, 0.0))
        with pytest.raises(KeyUnavailable):
            vault.rotate_owner_key("alice")  # numbered past what the keyring ever issued: nothing written
        marks = {user: value for (service, user), value in ring.secrets.items()
                 if service.endswith("/owner-issued") and user != "adopted"}
        assert [user for _, user in owner_key_entries(ring.secrets)] == [f"{tag.hex()}.1"]
    assert all(int(value) <= ALWAYS_PROBED + PROBE_GAP for value in marks.values()), marks
