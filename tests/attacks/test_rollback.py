"""Rollback: a writer of the data directory puts back an older copy of a row, or of the whole file.

What v1 detects and what it does not (threat_model.md, "Residual risks" and "Adversarial tests"):
- NOT detected: a deleted (or collected) row written back verbatim is readable again, with its original
  content, until its original expiry; a whole file put back resurrects everything in it; a row rolled back
  to the version before an extend_turn reads as that older version (with its shorter life).
- Detected: a rolled-back row can never outlive its authenticated expiry (moving expires_at is an
  IntegrityError); parts of two versions mixed (old metadata or summary under the new expiry) are an
  IntegrityError; once the owner's keys are gone from the keyring, no old copy opens.
In no case does a rollback yield content the row never had.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.support.keyring_entries import owner_key_entries
from vault import IntegrityError, KeyUnavailable, NotFound, Vault

CONTENT = "".join(f"old page line {i}\n" for i in range(8000))  # ~140 KB: three chunks


@pytest.fixture
def doomed(vault, alice, attacker):
    """A three-chunk row and the attacker's copy of it, as it is now (SqliteAttacker.save_row)."""
    rep = vault.put(alice, "t", 1, "web.fetch", CONTENT, ttl_seconds=3600)
    return rep, attacker.save_row(attacker.seq_of(rep.id))


@pytest.mark.parametrize("removal", ["delete", "gc"])
def test_deleted_row_written_back_is_readable_again_until_its_original_expiry(vault, alice, attacker, clock, doomed,
                                                                              removal):
    """Not detected in v1 (a residual risk): the resurrected row is the original, never altered content."""
    rep, copy = doomed
    if removal == "delete":
        vault.delete(alice, rep.id)
    else:
        assert vault.gc(now=rep.expires_at) == 1
    with pytest.raises(NotFound):
        vault.get(alice, rep.id)
    attacker.restore_row(copy)
    record = vault.get(alice, rep.id)
    assert (record.content, record.expires_at) == (CONTENT, rep.expires_at)
    assert [r.id for r in vault.list_for_turn(alice, "t")] == [rep.id]
    clock.advance(3600)  # its authenticated expiry still holds
    with pytest.raises(NotFound):
        vault.get(alice, rep.id)
    assert vault.list_for_turn(alice, "t") == []


def test_written_back_row_with_a_later_expiry_is_an_integrity_error(vault, alice, attacker, clock, doomed):
    """Detected: the expiry is in the metadata's and the summary's AAD, so a copy cannot be made to live longer."""
    rep, copy = doomed
    vault.delete(alice, rep.id)
    attacker.restore_row(copy, expires_at=rep.expires_at + 86400)
    clock.advance(3600)  # past the real expiry, before the forged one
    for call in (lambda: vault.get(alice, rep.id), lambda: vault.read(alice, rep.id, mode="head", n=10),
                 lambda: vault.list_for_turn(alice, "t")):
        with pytest.raises(IntegrityError):
            call()
    assert vault.stats()["rows"] == 1  # detected, counted, and nothing deleted


def test_row_rolled_back_to_before_extend_turn_reads_as_its_older_shorter_lived_version(vault, alice, attacker,
                                                                                      clock, doomed):
    """Not detected: the older version is authentic. It only brings back the shorter life it had."""
    rep, before = doomed
    assert vault.extend_turn(alice, "t", 7200) == 1
    assert vault.get(alice, rep.id).expires_at == clock.now + 7200
    attacker.restore_row(before)
    record = vault.get(alice, rep.id)
    assert (record.content, record.expires_at) == (CONTENT, rep.expires_at)
    clock.advance(3600)
    with pytest.raises(NotFound):
        vault.get(alice, rep.id)


MIXED = {  # which part comes from the older version -> (columns taken from it, calls that must detect it)
    "old_metadata": ({"metadata"}, {"get", "read"}),
    "old_summary": ({"summary"}, {"get", "list"}),
    "old_expiry_column": ({"expires_at"}, {"get", "read", "list"}),
}


@pytest.mark.parametrize("mixed", sorted(MIXED))
def test_parts_of_two_versions_mixed_are_integrity_errors(vault, alice, attacker, doomed, mixed):
    """Detected: the metadata and the summary each bind the expiry. A call that does not open the mixed-in part
    (read opens no summary, a listing opens no metadata) returns exactly what it returned before."""
    rep, before = doomed
    vault.extend_turn(alice, "t", 7200)
    calls = {"get": lambda: vault.get(alice, rep.id), "read": lambda: vault.read(alice, rep.id, mode="tail", n=10),
             "list": lambda: vault.list_for_turn(alice, "t")}
    pristine = {name: call() for name, call in calls.items()}
    after = attacker.save_row(attacker.seq_of(rep.id))
    old_parts, detecting = MIXED[mixed]
    row = {column: before.columns[column] for column in old_parts if column in before.columns}
    attacker.restore_row(replace(after, summary=before.summary if "summary" in old_parts else after.summary), **row)
    for name, call in calls.items():
        if name in detecting:
            with pytest.raises(IntegrityError):
                call()
        else:
            assert call() == pristine[name]
    assert vault.stats()["rows"] == 1


def test_whole_file_rolled_back_resurrects_deleted_rows(db_path, attacker, keyring_backend, clock, alice, bob):
    """Not detected: the file as it was is a consistent, authentic vault (backups are a residual risk too)."""
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault:
        mine = vault.put(alice, "t", 1, "tool", CONTENT)
        theirs = vault.put(bob, "t", 1, "tool", "bob's page")
    backup = db_path.with_name("backup.db")
    attacker.copy_file(backup)
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault:
        vault.delete(alice, mine.id)
        vault.delete(bob, theirs.id)
    attacker.put_back_file(backup)
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault:
        assert vault.get(alice, mine.id).content == CONTENT
        assert vault.get(bob, theirs.id).content == "bob's page"
        with pytest.raises(NotFound):
            vault.get(bob, mine.id)  # ownership still holds in the old file


def test_old_copy_does_not_open_once_the_owners_keys_are_destroyed(vault, alice, bob, db_path, attacker,
                                                                   keyring_backend, clock, doomed):
    """Detected, in effect: crypto-shredding (the owner's keyset removed from the keyring) defeats every old copy;
    other owners are unaffected."""
    rep, copy = doomed
    (alice_entry,) = owner_key_entries(keyring_backend.secrets)  # only alice has keys yet
    bob_row = vault.put(bob, "t", 1, "tool", "bob stays")
    vault.delete(alice, rep.id)
    attacker.restore_row(copy)
    assert vault.get(alice, rep.id).content == CONTENT  # the copy is live while the keys exist
    del keyring_backend.secrets[alice_entry]
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as fresh:  # no cached keys
        with pytest.raises(KeyUnavailable):
            fresh.get(alice, rep.id)
        with pytest.raises(KeyUnavailable):
            fresh.list_for_turn(alice, "t")
        assert fresh.get(bob, bob_row.id).content == "bob stays"
