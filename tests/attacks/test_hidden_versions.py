"""A writer of the database hides an owner's key versions (deletes their commitments and reservations) just before
the owner is shredded, to put them back afterwards: the shred must still destroy every key of the owner in the
keyring, or every copy of their rows opens again once the rows are restored (both stores)."""

from __future__ import annotations

from tests.support.keyring_entries import owner_key_entries
from vault import Principal, Vault

ALICE = Principal("alice")


def test_a_shred_destroys_keys_whose_versions_a_writer_hid_from_the_database(db_path, keyring_backend, attacker):
    with Vault.open(db_path, keyring_backend=keyring_backend) as vault:
        vault.put(ALICE, "t", 1, "x", "shred me")
        vault.rotate_owner_key("alice")
        vault.put(Principal("bob"), "t", 1, "x", "bob stays")
        assert len(owner_key_entries(keyring_backend.secrets)) == 3
        alice = "(SELECT owner_tag FROM owner_keys WHERE version = 2)"  # the one owner with a second version
        attacker.run(f"DELETE FROM key_reservations WHERE owner_tag IN {alice}",
                     f"DELETE FROM owner_keys WHERE owner_tag IN {alice}")
        vault.shred_owner("alice")
        left = owner_key_entries(keyring_backend.secrets)
        assert len(left) == 1 and left[0][1].endswith(".1")  # bob's one version, and nothing of alice's
        assert vault.stats()["keyring_entries_destroyed_on_sight"] == 2
        assert vault.get(Principal("bob"), vault.list_for_turn(Principal("bob"), "t")[0].id).content == "bob stays"
