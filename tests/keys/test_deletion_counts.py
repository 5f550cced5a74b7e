"""The owners' counts of deletes in the keyring (threat_model.md, "Rollback"): a keyring that fails to take a count
after the delete committed leaves the delete done and the count written later; a count below the file's (a write
that landed late) is never an alarm; a count that is not one is refused."""

from __future__ import annotations

import pytest

from tests.keys.test_key_faults import FaultyKeyring
from vault import IntegrityError, KeyUnavailable, NotFound, Principal, Vault

ALICE = Principal("alice")


def count_in_keyring(keyring_backend) -> list[str]:
    """The owners' counts of deletes in the keyring."""
    return [value for (service, _), value in keyring_backend.secrets.items() if service.endswith("/deletions")]


@pytest.mark.parametrize("fault", ["raises", "lost_reply", "dropped"])
def test_a_keyring_that_does_not_take_the_count_leaves_the_delete_done(db_path, keyring_backend, clock, attacker,
                                                                        fault, location_named):
    """After the delete committed, the keyring failing to store the new count does not undo it: counted and logged;
    the owner's next extend_turn (or delete) through a working keyring writes the count, and from then on a file
    put back to before the delete is detected."""
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault:
        ids = [vault.put(ALICE, "t", step, "tool", f"row {step}").id for step in range(3)]
    backup = location_named("backup.db")
    attacker.copy_file(backup)
    faulty = {"raises": lambda: FaultyKeyring(keyring_backend.secrets, {"set"}),
              "lost_reply": lambda: FaultyKeyring(keyring_backend.secrets, lost_reply="/deletions"),
              "dropped": lambda: FaultyKeyring(keyring_backend.secrets, drop="/deletions")}[fault]()
    with Vault.open(db_path, keyring_backend=faulty, clock=clock) as vault:
        vault.delete(ALICE, ids[0])
        with pytest.raises(NotFound):
            vault.get(ALICE, ids[0])
        assert vault.stats()["counters"]["deletes_not_counted_in_keyring"] == 1
    assert ids[0] not in attacker.row_ids() and len(attacker.ledgers()) == 1
    assert count_in_keyring(keyring_backend) == (["1"] if fault == "lost_reply" else [])
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault:
        assert vault.extend_turn(ALICE, "t", 7200) == 2
    assert count_in_keyring(keyring_backend) == ["1"]
    attacker.put_back_file(backup)
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault, pytest.raises(IntegrityError):
        vault.extend_turn(ALICE, "t", 7200)


def test_a_keyring_count_below_the_files_is_no_alarm_and_is_raised_again(vault, keyring_backend):
    """A keyring write that lands late (or after another process's) leaves the keyring below the file, never above:
    never a false alarm; the next extend_turn writes the file's count back."""
    vault.put(ALICE, "t", 1, "tool", "kept")
    for row_id in [vault.put(ALICE, "t", step, "tool", "x").id for step in (2, 3)]:
        vault.delete(ALICE, row_id)
    (entry,) = [key for key in keyring_backend.secrets if key[0].endswith("/deletions")]
    keyring_backend.secrets[entry] = "1"  # the first delete's write, landing after the second's
    assert vault.extend_turn(ALICE, "t", 7200) == 1
    assert keyring_backend.secrets[entry] == "2"
    keyring_backend.secrets[entry] = "02"  # not a count: the keyring is not trusted blindly either
    with pytest.raises(KeyUnavailable, match="not a count"):
        vault.extend_turn(ALICE, "t", 9000)
