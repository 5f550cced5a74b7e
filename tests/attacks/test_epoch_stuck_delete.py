"""An epoch key the keyring keeps refusing to delete holds back the destroyed-through marker, but not the probe: the
probed-through cursor moves on, so an entry of a later epoch whose records a writer deleted is still found and
destroyed, and a copy of its rows never opens (threat_model.md, "Expiry epochs"). Both stores."""

from __future__ import annotations

from tests.keys.test_key_faults import FaultyKeyring
from tests.support.clock import T0, FakeClock
from tests.support.epochs import SKEW, E, epoch_entries, outcomes
from vault import Principal, Vault, storage

ALICE = Principal("alice")
STUCK = f"{E}.500000.1"  # T0 starts epoch 500,000 of the default length
LATER = 500_060  # an epoch more than PROBE_BATCH (48) epochs past the stuck one


class _RefusesOneDelete(FaultyKeyring):
    """The keyring (sharing its secrets) refusing, every time, to delete one entry: a locked item, an ACL."""

    def __init__(self, secrets, refused: str) -> None:
        super().__init__(secrets)
        self.refused, self.was_armed = refused, True

    def delete_password(self, service, username):
        if username == self.refused:
            self.failed += 1
            raise RuntimeError("the keyring refused to delete this item")
        super().delete_password(service, username)


def test_one_entry_the_keyring_refuses_to_delete_does_not_stop_later_epochs_being_probed(
        db_path, attacker, location_named):
    ring = _RefusesOneDelete({}, STUCK)
    clock = FakeClock(T0)
    with Vault.open(db_path, keyring_backend=ring, clock=clock) as vault:
        vault.put(ALICE, "t", 1, "x", "short row", ttl_seconds=600)
    clock.now = T0 + E + SKEW
    with Vault.open(db_path, keyring_backend=ring, clock=clock) as vault:
        vault.gc()
    assert STUCK in epoch_entries(ring)  # pending: the refusal the fix keeps the marker below
    clock.now = T0 + (LATER - 500_000) * E + 10
    with Vault.open(db_path, keyring_backend=ring, clock=clock) as vault:
        row = vault.put(ALICE, "t", 2, "x", "the dentist is on Tuesday", ttl_seconds=600).id
    backup = location_named("backup.db")
    storage.backup(db_path, backup)
    attacker.run(("DELETE FROM epoch_keys WHERE length = ? AND epoch = ?", E, LATER),
                 ("DELETE FROM epoch_reservations WHERE length = ? AND epoch = ?", E, LATER))
    for hours in range(1, 4):
        clock.now = T0 + (LATER - 500_000 + hours) * E + SKEW
        with Vault.open(db_path, keyring_backend=ring, clock=clock) as vault:
            vault.gc()
    wound_back = FakeClock(T0 + (LATER - 500_000) * E + 20)  # as a holder of the copy would set it
    with Vault.open(backup, keyring_backend=ring, clock=wound_back) as copy:
        found = outcomes(copy, ALICE, row)
    assert "the dentist is on Tuesday" not in repr(found), (found, epoch_entries(ring))
