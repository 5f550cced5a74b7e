"""An owner whose key versions passed the always-probed range before the keyring kept an issued-through mark (a
release before it, a month of daily maintain): the first open of this release writes the mark from the highest
version the database then lists, so a writer who later deletes the owner's records cannot hide the live version
from a shred."""

from __future__ import annotations

from keys.testing import MemoryKeyring
from tests.support.clock import T0, FakeClock
from tests.support.epochs import assert_nothing_of
from tests.support.keyring_entries import owner_key_entries
from vault import Principal, Vault, storage

ALICE, BOB = Principal("alice"), Principal("bob")
RETIREMENTS = 32  # 32 daily `maintain` runs before the upgrade: live version 33, past ALWAYS_PROBED + PROBE_GAP


def test_a_shred_destroys_the_live_version_of_an_owner_numbered_past_the_probe_before_marks_existed(
        db_path, attacker, location_named):
    ring, clock = MemoryKeyring(), FakeClock(T0)
    with Vault.open(db_path, keyring_backend=ring, clock=clock) as vault:
        vault.put(BOB, "t", 1, "x", "bob stays")
        bob = {user.split(".")[0] for _, user in owner_key_entries(ring.secrets)}
        vault.put(ALICE, "t", 1, "x", "first")
        for _ in range(RETIREMENTS):
            vault.maintain_keys()
        row = vault.put(ALICE, "t", 2, "x", "the dentist is on Tuesday").id
    # a release that kept no marks made these versions: remove the marks this one writes
    for key in [key for key in ring.secrets if key[0].endswith("/owner-issued")]:
        del ring.secrets[key]
    alice = [user for _, user in owner_key_entries(ring.secrets) if user.split(".")[0] not in bob]
    assert [user.rsplit(".", 1)[1] for user in alice] == [str(RETIREMENTS + 1)]
    tag = bytes.fromhex(alice[0].split(".")[0])
    with Vault.open(db_path, keyring_backend=ring, clock=clock) as vault:  # the upgraded release
        backup = location_named("before-shred.db")
        storage.backup(db_path, backup)
        attacker.run(*[(f"DELETE FROM {table} WHERE owner_tag = ?", tag)
                       for table in ("key_tombstones", "owner_keys", "key_reservations")])
        vault.shred_owner("alice")  # reports success
        left = [user for _, user in owner_key_entries(ring.secrets) if user.split(".")[0] not in bob]
    with Vault.open(backup, keyring_backend=ring, clock=clock) as copy:
        assert left == [], left
        assert_nothing_of(copy, ALICE, row)
