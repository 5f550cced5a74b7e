"""How long a ledger keeps a deleted row (threat_model.md, "Rollback"): until every genuine copy of the row has
expired, whatever expiry the file showed at the delete. Two attacks: a writer lowers the clear expiry between the
delete's check and its write, or undoes an extend_turn before the delete; either would drop the entry while a
longer-lived copy exists, which would then read again and be extended."""

from __future__ import annotations

import pytest
from keyring.backend import KeyringBackend

from keys.testing import MemoryKeyring
from tests.attacks.sqlite_attacker import SqliteAttacker
from tests.support.clock import FakeClock
from tests.support.fault_counts import FaultDouble, Switch
from vault import IntegrityError, NotFound, Principal, Vault

ALICE = Principal("alice")


class LoweringKeyring(MemoryKeyring, FaultDouble):
    """Stands in for the attacker's timing: while the delete reads the owner's count of deletes (before it takes
    the write lock), the clear expiry of row ``row_id`` is set to 0 in the file (counted)."""

    attacker: SqliteAttacker | None = None
    row_id = Switch()

    def get_password(self, service: str, username: str) -> str | None:
        if service.endswith("/deletions") and self.attacker is not None and self.row_id:
            self.attacker.run(("UPDATE rows SET expires_at = 0 WHERE id = ?", bytes.fromhex(self.row_id)))
            self.row_id = None
            self.failed()
        return super().get_password(service, username)


KeyringBackend._classes.discard(LoweringKeyring)


def assert_never_back(vault: Vault, attacker: SqliteAttacker, row_id: str) -> None:
    """The written-back deleted row: not found, not listed, never extended (removed and reported), gone."""
    with pytest.raises(NotFound):
        vault.get(ALICE, row_id)
    assert row_id not in [r.id for r in vault.list_for_turn(ALICE, "t")]
    with pytest.raises(IntegrityError):
        vault.extend_turn(ALICE, "t", 7200)
    assert row_id not in attacker.row_ids()


def test_an_expiry_lowered_during_the_delete_does_not_shorten_the_ledgers_memory(db_path, attacker):
    ring, clock = LoweringKeyring(), FakeClock()
    with Vault.open(db_path, keyring_backend=ring, clock=clock) as vault:
        row = vault.put(ALICE, "t", 1, "x", "deleted by its user", ttl_seconds=3600).id
        copy = attacker.save_row(attacker.seq_of(row))
        ring.attacker, ring.row_id = attacker, row
        vault.delete(ALICE, row)  # the file's expiry reads 0 by the time the delete writes its ledger
        vault.delete(ALICE, vault.put(ALICE, "u", 1, "x", "another").id)  # the owner's next delete prunes
        attacker.restore_row(copy)
        assert_never_back(vault, attacker, row)


def test_an_extension_undone_before_the_delete_does_not_let_the_longer_copy_back(db_path, attacker):
    clock = FakeClock()
    with Vault.open(db_path, keyring_backend=MemoryKeyring(), clock=clock) as vault:
        row = vault.put(ALICE, "t", 1, "x", "deleted by its user", ttl_seconds=60).id
        short = attacker.save_row(attacker.seq_of(row))
        assert vault.extend_turn(ALICE, "t", 7200) == 1
        extended = attacker.save_row(attacker.seq_of(row))
        attacker.restore_row(short)  # the extension undone (a residual risk), then the user deletes the row
        vault.delete(ALICE, row)
        clock.advance(120)  # past the short copy's expiry
        vault.delete(ALICE, vault.put(ALICE, "u", 1, "x", "another").id)  # the owner's next delete prunes
        attacker.restore_row(extended)
        assert_never_back(vault, attacker, row)
