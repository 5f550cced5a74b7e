"""A writer of the database against the bounds that make erasure final: how far a shred looks for an owner's key
versions in the keyring, and which attempts of an ended epoch gc looks for. Neither may come from the database
alone (threat_model.md, "What the database cannot move"): a writer who deletes the records that would bound the
search, or plants one that moves the vault's numbering past it, must not keep a key alive. Both stores."""

from __future__ import annotations

import pytest

from keys.keyring.owner_marks import ALWAYS_PROBED, PROBE_GAP
from keys.testing import MemoryKeyring
from tests.support.clock import T0, FakeClock
from tests.support.epochs import SKEW, E, assert_nothing_of, epoch_entries
from tests.support.keyring_entries import owner_key_entries
from vault import KeyUnavailable, Principal, Vault, storage

ALICE, BOB = Principal("alice"), Principal("bob")
RETIREMENTS = 17  # a daily `scratchvault maintain` for 17 days: more retired versions than a shred's old miss limit


def _alice_entries(ring: MemoryKeyring, bob_entries: set[tuple[str, str]]) -> list[tuple[str, str]]:
    """The owner key entries of everyone but bob (whose tags ``bob_entries`` name)."""
    bob_tags = {user.split(".")[0] for _, user in bob_entries}
    return [entry for entry in owner_key_entries(ring.secrets) if entry[1].split(".")[0] not in bob_tags]


def test_a_shred_destroys_the_live_version_past_many_retired_ones_whose_tombstones_a_writer_deleted(
        db_path, attacker, location_named):
    ring, clock = MemoryKeyring(), FakeClock(T0)
    with Vault.open(db_path, keyring_backend=ring, clock=clock) as vault:
        vault.put(BOB, "t", 1, "x", "bob stays")
        bob = set(owner_key_entries(ring.secrets))
        vault.put(ALICE, "t", 1, "x", "first")
        for _ in range(RETIREMENTS):
            vault.maintain_keys()
        row = vault.put(ALICE, "t", 2, "x", "the dentist is on Tuesday").id
        assert [user.rsplit(".", 1)[1] for _, user in _alice_entries(ring, bob)] == [str(RETIREMENTS + 1)]
        backup = location_named("before-shred.db")
        storage.backup(db_path, backup)
        tag = bytes.fromhex(_alice_entries(ring, bob)[0][1].split(".")[0])
        attacker.run(*[(f"DELETE FROM {table} WHERE owner_tag = ?", tag)  # every record of how far versions go
                       for table in ("key_tombstones", "owner_keys", "key_reservations")])
        vault.shred_owner("alice")
        assert _alice_entries(ring, bob) == []
    with Vault.open(backup, keyring_backend=ring, clock=clock) as copy:
        assert_nothing_of(copy, ALICE, row)


@pytest.mark.parametrize("planted", [20, 40])
def test_a_version_numbered_past_a_planted_reservation_is_destroyed_by_a_shred_or_never_written(db_path, attacker,
                                                                                              planted):
    """Past the always-probed versions by up to the gap, the vault writes it after raising the owner's keyring mark
    (so a shred finds it); further, it refuses to write it at all."""
    ring = MemoryKeyring()
    with Vault.open(db_path, keyring_backend=ring) as vault:
        vault.put(BOB, "t", 1, "x", "bob stays")
        bob = set(owner_key_entries(ring.secrets))
        vault.put(ALICE, "t", 1, "x", "first")
        tag = bytes.fromhex(_alice_entries(ring, bob)[0][1].split(".")[0])
        attacker.run(("INSERT INTO key_reservations (owner_tag, version, reserved_at) VALUES (?, ?, ?)",
                      tag, planted, 0.0))  # the next version the vault numbers is one past it
        if planted + 1 > ALWAYS_PROBED + PROBE_GAP:
            with pytest.raises(KeyUnavailable):
                vault.rotate_owner_key("alice")
        else:
            vault.rotate_owner_key("alice")
        made = sorted(int(user.rsplit(".", 1)[1]) for _, user in _alice_entries(ring, bob))
        assert made == ([1] if planted + 1 > ALWAYS_PROBED + PROBE_GAP else [1, planted + 1])
        attacker.run(("DELETE FROM key_reservations WHERE owner_tag = ?", tag),
                     ("DELETE FROM owner_keys WHERE owner_tag = ?", tag),
                     ("DELETE FROM key_tombstones WHERE owner_tag = ?", tag))
        vault.shred_owner("alice")
        assert _alice_entries(ring, bob) == []


def test_gc_destroys_an_epoch_key_the_vault_numbered_past_a_planted_reservation(db_path, attacker, location_named):
    ring, clock = MemoryKeyring(), FakeClock(T0)
    epoch = int(T0) // E  # the epoch of a row put at T0 with a ten-minute lifetime
    with Vault.open(db_path, keyring_backend=ring, clock=clock) as vault:
        vault.put(BOB, "t", 1, "x", "bob's row lives in a later epoch", ttl_seconds=2 * 86400)
        attacker.run(("INSERT INTO epoch_reservations (length, epoch, attempt, reserved_at) VALUES (?, ?, ?, ?)",
                      E, epoch, 2, T0))  # the vault's attempt at this epoch's key is then the third
        row = vault.put(ALICE, "t", 1, "x", "the dentist is on Tuesday", ttl_seconds=600).id
        assert f"{E}.{epoch}.3" in epoch_entries(ring)
        backup = location_named("backup.db")
        storage.backup(db_path, backup)
        attacker.run(("DELETE FROM epoch_keys WHERE epoch = ?", epoch),
                     ("DELETE FROM epoch_reservations WHERE epoch = ?", epoch),
                     ("DELETE FROM epoch_tombstones WHERE epoch = ?", epoch))
        clock.now = (epoch + 1) * E + SKEW
        vault.gc()
        assert [entry for entry in epoch_entries(ring) if entry.startswith(f"{E}.{epoch}.")] == []
    clock.now = T0
    with Vault.open(backup, keyring_backend=ring, clock=clock) as copy:
        assert_nothing_of(copy, ALICE, row)
