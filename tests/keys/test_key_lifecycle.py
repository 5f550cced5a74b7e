"""Key lifecycle through the public API: rotation, rewrap, retirement, crypto-shredding with a backup copy, stale
caches in another Vault, a keyring that hangs, and the same on the Secret Service. A rewrap killed half-way is
tests/system/test_crash.py."""

from __future__ import annotations

import shutil
import time
import uuid
from pathlib import Path

import pytest
from keyring.backend import KeyringBackend

from keys.testing import MemoryKeyring
from tests.support.fault_counts import FaultDouble, Switch
from tests.support.keyring_entries import owner_key_entries
from vault import InvalidArgument, KeyUnavailable, NotFound, Principal, Vault, storage

ALICE, BOB = Principal("alice"), Principal("bob")


def backup(db_path: Path, target: Path) -> Path:
    """A consistent copy of a live database, as an operator's backup job would take it."""
    storage.backup(db_path, target)
    return target


def contents(attacker) -> tuple[dict, list]:
    """Every sealed chunk, and every row's id and metadata: what a rewrap must leave as they were."""
    return attacker.chunks(), sorted((row["id"], row["metadata"]) for row in attacker.rows().values())


def test_rotation_keeps_old_rows_readable_and_new_rows_use_the_new_version(vault):
    old = vault.put(ALICE, "t", 1, "x", "before rotation")
    assert vault.rotate_owner_key("alice") == 2
    new = vault.put(ALICE, "t", 2, "x", "after rotation")
    assert (vault.get(ALICE, old.id).key_version, vault.get(ALICE, new.id).key_version) == (1, 2)
    assert vault.get(ALICE, old.id).content == "before rotation"
    assert vault.rotate_owner_key("alice") == 3


def test_rotating_an_owner_without_keys_is_key_unavailable(vault):
    with pytest.raises(KeyUnavailable):
        vault.rotate_owner_key("nobody")


def test_rewrap_moves_every_row_to_the_primary_version_without_touching_content(vault, attacker):
    ids = [vault.put(ALICE, "t", n, "x", f"row {n} " * 20_000).id for n in range(5)]  # multi-chunk rows
    bob_row = vault.put(BOB, "t", 1, "x", "bob's").id
    before = contents(attacker)
    vault.rotate_owner_key("alice")
    vault.rotate_owner_key("bob")
    assert vault.rewrap("alice") == 5
    assert vault.rewrap("alice") == 0  # idempotent
    assert contents(attacker) == before
    assert {vault.get(ALICE, row).key_version for row in ids} == {2}
    assert vault.get(ALICE, ids[3]).content == "row 3 " * 20_000
    assert vault.get(BOB, bob_row).key_version == 1  # only alice was asked for
    assert vault.rewrap() == 1  # None: every owner the vault knows
    assert vault.get(BOB, bob_row).key_version == 2


def test_retire_is_refused_while_a_row_needs_the_version_then_removes_it(vault, keyring_backend):
    row = vault.put(ALICE, "t", 1, "x", "kept").id
    vault.rotate_owner_key("alice")
    with pytest.raises(InvalidArgument, match="rewrap"):
        vault.retire_old_key_versions("alice")
    assert vault.get(ALICE, row).content == "kept"
    vault.rewrap("alice")
    assert vault.retire_old_key_versions("alice") == 1
    assert vault.retire_old_key_versions("alice") == 0
    assert [user[-2:] for _, user in owner_key_entries(keyring_backend.secrets)] == [".2"]
    assert vault.get(ALICE, row).content == "kept"


def test_after_retirement_a_backup_from_before_the_rewrap_is_unreadable(db_path, keyring_backend, location_named):
    with Vault.open(db_path, keyring_backend=keyring_backend) as vault:
        row = vault.put(ALICE, "t", 1, "x", "old secret").id
        copy = backup(db_path, location_named("backup.db"))
        vault.rotate_owner_key("alice")
        vault.rewrap("alice")
        vault.retire_old_key_versions("alice")
        assert vault.get(ALICE, row).content == "old secret"
    with Vault.open(copy, keyring_backend=keyring_backend) as old:
        with pytest.raises(KeyUnavailable):
            old.get(ALICE, row)
        with pytest.raises(KeyUnavailable):  # nor its summaries (sealed under a key derived from v1)
            old.list_for_turn(ALICE, "t")


def test_shred_destroys_an_owner_everywhere_and_leaves_others_alone(db_path, keyring_backend, location_named):
    with Vault.open(db_path, keyring_backend=keyring_backend) as vault:
        rows = [vault.put(ALICE, "t", n, "x", f"alice {n}").id for n in range(3)]
        bob_row = vault.put(BOB, "t", 1, "x", "bob stays").id
        copy = backup(db_path, location_named("backup.db"))
        assert vault.shred_owner("alice") == 3
        assert vault.shred_owner("alice") == 0  # safe to run again
        with pytest.raises(NotFound):
            vault.get(ALICE, rows[0])
        assert vault.list_for_turn(ALICE, "t") == []
        assert vault.get(BOB, bob_row).content == "bob stays"
        fresh = vault.put(ALICE, "t", 9, "x", "a new start")  # a returning user gets a new keyset
        assert vault.get(ALICE, fresh.id).content == "a new start"
    with Vault.open(copy, keyring_backend=keyring_backend) as old:
        for row in rows:
            with pytest.raises(KeyUnavailable):
                old.get(ALICE, row)
        with pytest.raises(KeyUnavailable):
            old.list_for_turn(ALICE, "t")
        assert old.get(BOB, bob_row).content == "bob stays"


def test_shred_interrupted_after_the_keyring_is_finished_by_running_it_again(vault, monkeypatch):
    row = vault.put(ALICE, "t", 1, "x", "doomed").id
    monkeypatch.setattr(vault._store, "delete_owner_rows", lambda *args: (_ for _ in ()).throw(OSError("crash")))
    with pytest.raises(OSError):
        vault.shred_owner("alice")
    monkeypatch.undo()
    with pytest.raises(KeyUnavailable):  # rows remain but their key is gone: never a fresh key over them
        vault.put(ALICE, "t", 2, "x", "not yet")
    with pytest.raises(KeyUnavailable):
        vault.get(ALICE, row)
    assert vault.shred_owner("alice") == 1
    assert vault.get(ALICE, vault.put(ALICE, "t", 2, "x", "now").id).content == "now"


def test_a_stale_cache_in_another_vault_follows_rotation_retirement_and_shredding(db_path, keyring_backend):
    first = Vault.open(db_path, keyring_backend=keyring_backend)
    second = Vault.open(db_path, keyring_backend=keyring_backend)
    row = second.put(ALICE, "t", 1, "x", "cached").id  # second now caches alice's keyset v1
    first.rotate_owner_key("alice")
    newer = first.put(ALICE, "t", 2, "x", "under v2").id
    assert second.get(ALICE, newer).content == "under v2"  # unknown version: reloads once
    first.rewrap("alice")
    first.retire_old_key_versions("alice")
    late = second.put(ALICE, "t", 3, "x", "after retirement").id
    assert first.get(ALICE, late).content == "after retirement"
    first.shred_owner("alice")
    again = second.put(ALICE, "t", 4, "x", "after shred").id  # cached keyset was shredded: a new one
    assert first.get(ALICE, again).content == "after shred"
    for gone in (row, newer, late):
        with pytest.raises(NotFound):
            second.get(ALICE, gone)
    first.close()
    second.close()


class HangingKeyring(MemoryKeyring, FaultDouble):
    """A keyring whose reads hang while ``hanging`` (a stuck D-Bus call), counting them."""

    hanging = Switch()

    def get_password(self, service, username):
        if self.hanging:
            self.failed()
            time.sleep(3)
        return super().get_password(service, username)


KeyringBackend._classes.discard(HangingKeyring)  # never a candidate for keyring's auto-detection


def test_a_hanging_keyring_is_key_unavailable_within_the_timeout(db_path):
    ring = HangingKeyring()
    with Vault.open(db_path, keyring_backend=ring, keyring_timeout=0.3, key_cache_seconds=0.01) as vault:
        row = vault.put(ALICE, "t", 1, "x", "waiting").id
        time.sleep(0.05)
        ring.hanging = True
        started = time.monotonic()
        with pytest.raises(KeyUnavailable, match="did not answer"):
            vault.get(ALICE, row)
        assert time.monotonic() - started < 2
        ring.hanging = False
        time.sleep(3)  # let the hung call finish before the next
        assert vault.get(ALICE, row).content == "waiting"


@pytest.mark.real_keyring
def test_rotate_rewrap_retire_and_shred_on_the_secret_service(real_keyring, db_path, location_named):
    user = Principal(f"lifecycle-{uuid.uuid4().hex}")
    with Vault.open(db_path, keyring_backend=real_keyring) as vault:
        row = vault.put(user, "t", 1, "x", "real keyring").id
        copy = backup(db_path, location_named("backup.db"))
        assert vault.rotate_owner_key(user.user_id) == 2
        assert vault.rewrap(user.user_id) == 1
        assert vault.retire_old_key_versions(user.user_id) == 1
        assert vault.get(user, row).content == "real keyring"
        assert vault.shred_owner(user.user_id) == 1
        assert vault.stats()["rows"] == 0
    with Vault.open(copy, keyring_backend=real_keyring) as old, pytest.raises(KeyUnavailable):
        old.get(user, row)
    if isinstance(db_path, Path):  # the file and its copy hold nothing of this user's any more: gone now
        shutil.rmtree(db_path.parent)
