"""Rollback: a writer of the data directory puts back an older copy of a row, of its owner's ledger of deleted
rows, or of the whole file (threat_model.md, "Rollback", "Residual risks" and "Adversarial tests").

- Detected: a deleted row written back is named by its owner's ledger (authenticated under a subkey of the index
  key): reads are NotFound, listings leave it out, extend_turn and Scratchpad.resume never extend it but remove it
  again (IntegrityError), gc removes it; a ledger altered, removed or put back to an older copy, and a whole file
  put back to before a delete, count fewer deletes than the keyring does: the owner's next delete or extend_turn
  is an IntegrityError and changes nothing; a rolled-back row can never outlive its authenticated expiry; parts
  of two versions mixed are an IntegrityError; once the owner's keys are gone from the keyring, no old copy opens.
- NOT detected: a row and its ledger put back together (or a whole file) read as they were until the owner's next
  delete or extend_turn, and at most until the row's original expiry; a row rolled back to the version before an
  extend_turn reads as that older version (with its shorter life).
In no case does a rollback yield content the row never had.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.support.keyring_entries import owner_key_entries
from vault import IntegrityError, KeyUnavailable, NotFound, Vault
from vault.engine import Scratchpad

CONTENT = "".join(f"old page line {i}\n" for i in range(8000))  # ~140 KB: three chunks


@pytest.fixture
def doomed(vault, alice, attacker):
    """A three-chunk row and the attacker's copy of it, as it is now (SqliteAttacker.save_row)."""
    rep = vault.put(alice, "t", 1, "web.fetch", CONTENT, ttl_seconds=3600)
    return rep, attacker.save_row(attacker.seq_of(rep.id))


def failures(vault: Vault) -> int:
    return vault.stats()["counters"]["integrity_failures"]


def ledger_of(attacker, rep) -> tuple:
    """The owner tag of a row and its owner's ledger of deleted rows, as the file holds them."""
    owner_tag = attacker.rows()[attacker.seq_of(rep.id)]["owner_tag"]
    return owner_tag, attacker.ledgers().get(owner_tag)


@pytest.mark.parametrize("removal", ["delete", "gc"])
def test_deleted_row_written_back_is_not_found_not_listed_and_removed_by_gc(vault, alice, attacker, clock, doomed,
                                                                            removal):
    """Detected: a delete (or a gc ahead of the clock, which collects a row still live) enters the row in its owner's
    ledger, so the copy written back reads as the deleted row it is, and the next gc removes it."""
    rep, copy = doomed
    if removal == "delete":
        vault.delete(alice, rep.id)
    else:
        assert vault.gc(now=rep.expires_at) == 1  # live by the clock (T0): collected early, entered in the ledger
    attacker.restore_row(copy)
    for call in (lambda: vault.get(alice, rep.id), lambda: vault.read(alice, rep.id, mode="head", n=10),
                 lambda: vault.delete(alice, rep.id)):
        with pytest.raises(NotFound):
            call()
    assert vault.list_for_turn(alice, "t") == [] and rep.id in attacker.row_ids()
    assert vault.gc() == 1 and attacker.counts() == (0, 0, 0)


@pytest.mark.parametrize("resume", ["extend_turn", "Scratchpad.resume"])
def test_deleted_row_written_back_is_never_extended_but_removed_again_and_reported(vault, alice, attacker, clock,
                                                                                   doomed, resume):
    """Detected: laundering a deleted row through a resume fails. A resumed turn extends its other rows, removes the
    copy (the owner deleted it) instead of giving it a fresh, longer expiry, and says so with a counted
    IntegrityError; the next resume goes through."""
    rep, copy = doomed
    kept = vault.put(alice, "t", 2, "tool", "kept", ttl_seconds=60)
    vault.delete(alice, rep.id)
    attacker.restore_row(copy)
    extend = {"extend_turn": lambda: vault.extend_turn(alice, "t", 7200),
              "Scratchpad.resume": lambda: Scratchpad(vault).resume(alice, "t", ttl_seconds=7200)}[resume]
    with pytest.raises(IntegrityError, match="removed again"):
        extend()
    assert failures(vault) == 1 and rep.id not in attacker.row_ids()
    assert vault.get(alice, kept.id).expires_at == clock.now + 7200
    assert [found["id"] for found in Scratchpad(vault).resume(alice, "t", ttl_seconds=7200)] == [kept.id]
    with pytest.raises(NotFound):
        vault.get(alice, rep.id)


def test_written_back_row_with_a_later_expiry_is_an_integrity_error(vault, alice, attacker, clock, doomed):
    """Detected: the expiry is in the metadata's and the summary's AAD, so a copy cannot be made to live longer, even
    with its owner's ledger removed (which alone reads can not tell from an owner who never deleted)."""
    rep, copy = doomed
    vault.delete(alice, rep.id)
    attacker.restore_row(copy, expires_at=rep.expires_at + 86400)
    attacker.write_ledger(ledger_of(attacker, rep)[0], None)
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


DETECTING = {"extend_turn": lambda vault, principal, other: vault.extend_turn(principal, "t", 7200),
             "Scratchpad.resume": lambda vault, principal, other: Scratchpad(vault).resume(principal, "t"),
             "delete": lambda vault, principal, other: vault.delete(principal, other)}


@pytest.mark.parametrize("call", sorted(DETECTING))
def test_whole_file_rolled_back_to_before_a_delete_is_detected_at_the_next_extend_or_delete(
        db_path, attacker, keyring_backend, clock, alice, bob, call, tmp_path):
    """Detected: the keyring counts a delete of alice's that the file put back does not. The old copy reads as it was
    (reads do not ask the keyring) until her next delete or extend_turn, which is an IntegrityError naming the
    remedy and changes nothing; so it never outlives its original expiry. Bob, who deleted nothing, is unaffected;
    once the operator removes the counts from the keyring (accepting the older copy), alice's calls work again."""
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault:
        mine = vault.put(alice, "t", 1, "tool", CONTENT)
        other = vault.put(alice, "t", 2, "tool", "other", ttl_seconds=7200)
        theirs = vault.put(bob, "t", 1, "tool", "bob's page")
    backup = tmp_path / "backup.db"  # on PostgreSQL: a copy of every table and the sequence, restored as a whole
    attacker.copy_file(backup)
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault:
        vault.delete(alice, mine.id)
    attacker.put_back_file(backup)
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault:
        assert vault.get(alice, mine.id).content == CONTENT
        rows = attacker.rows()
        with pytest.raises(IntegrityError, match="older copy") as caught:
            DETECTING[call](vault, alice, other.id)
        assert "/deletions" in str(caught.value) and failures(vault) == 1 and attacker.rows() == rows
        assert vault.extend_turn(bob, "t", 7200) == 1 and vault.get(bob, theirs.id).content == "bob's page"
        with pytest.raises(NotFound):
            vault.get(bob, mine.id)  # ownership still holds in the old file
        clock.advance(3600)
        with pytest.raises(NotFound):
            vault.get(alice, mine.id)
        for entry in [key for key in keyring_backend.secrets if key[0].endswith("/deletions")]:
            del keyring_backend.secrets[entry]  # the operator accepts the older copy (README, "Key management")
        assert vault.extend_turn(alice, "t", 7200) == 1  # the other row; the old copy expired meanwhile


def alter(part: str, ledger: tuple, older: tuple, others: tuple) -> tuple | None:
    """Alice's ledger (counter, body, tag) as the attacker leaves it."""
    counter, body, tag = ledger
    return {"body_flipped": (counter, body[:-1] + bytes([body[-1] ^ 1]), tag),
            "tag_flipped": (counter, body, tag[:-1] + bytes([tag[-1] ^ 1])),
            "counter_raised": (counter + 1, body, tag), "body_emptied": (counter, b"", tag),
            "another_owners_ledger": others, "removed": None, "put_back_older": older}[part]


@pytest.mark.parametrize("part", ["body_flipped", "tag_flipped", "counter_raised", "body_emptied",
                                  "another_owners_ledger", "removed", "put_back_older"])
def test_ledger_tampered_removed_or_put_back_is_detected_and_nothing_changes(vault, alice, bob, attacker, clock,
                                                                            keyring_backend, db_path, part):
    """Detected: an altered ledger fails authentication (its tag binds the vault, the owner, the count and the
    entries) on every call that consults it (a process's reads check a ledger's body once per count and tag, so
    one that verified it before goes on using what it verified); a removed one, or one put back from before the
    last delete, counts fewer deletes than the keyring: alice's next delete or extend_turn is an IntegrityError
    and changes nothing, gc still collects what it can. Bob's ledger and rows are unaffected."""
    rows = [vault.put(alice, "t", step, "tool", f"row {step}") for step in range(3)]
    vault.delete(alice, rows[0].id)
    owner_tag, older = ledger_of(attacker, rows[2])
    vault.delete(alice, rows[1].id)
    vault.delete(bob, vault.put(bob, "t", 1, "tool", "bob's").id)
    bobs = vault.put(bob, "t", 2, "tool", "bob's kept")
    ledger = attacker.ledgers()[owner_tag]
    others = next(found for tag, found in attacker.ledgers().items() if tag != owner_tag)
    attacker.write_ledger(owner_tag, alter(part, ledger, older, others))
    alices = lambda: {seq: row for seq, row in attacker.rows().items() if row["owner_tag"] == owner_tag}  # noqa: E731
    before = alices()
    for call in (lambda: vault.extend_turn(alice, "t", 7200), lambda: vault.delete(alice, rows[2].id)):
        with pytest.raises(IntegrityError):
            call()
    assert alices() == before and failures(vault) == 2
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as fresh:  # nothing verified yet
        if part in ("removed", "put_back_older"):  # authentic or absent: reads alone cannot tell
            assert fresh.get(alice, rows[2].id).content == "row 2" and fresh.gc() == 0
        else:
            with pytest.raises(IntegrityError):
                fresh.get(alice, rows[2].id)
            with pytest.raises(IntegrityError):
                fresh.gc()
    assert vault.extend_turn(bob, "t", 7200) == 1 and vault.get(bob, bobs.id).content == "bob's kept"
    assert alices() == before


def test_row_and_its_ledger_put_back_together_live_until_the_original_expiry_never_beyond(vault, alice, attacker,
                                                                                         clock, doomed):
    """Partly detected (a residual risk, bounded): with the ledger from before the delete, the copy reads as it was,
    but the owner's next extend_turn finds the ledger a delete short and extends nothing, so the copy dies at its
    original, authenticated expiry."""
    rep, copy = doomed
    owner_tag, before_delete = ledger_of(attacker, rep)
    vault.delete(alice, rep.id)
    attacker.restore_row(copy)
    attacker.write_ledger(owner_tag, before_delete)
    assert vault.get(alice, rep.id).content == CONTENT
    with pytest.raises(IntegrityError, match="older copy"):
        vault.extend_turn(alice, "t", 7200)
    clock.advance(3600)
    with pytest.raises(NotFound):
        vault.get(alice, rep.id)


def test_old_copy_does_not_open_once_the_owners_keys_are_destroyed(vault, alice, bob, db_path, attacker,
                                                                   keyring_backend, clock, doomed):
    """Detected, in effect: crypto-shredding (the owner's keyset removed from the keyring) defeats every old copy;
    other owners are unaffected."""
    rep, copy = doomed
    (alice_entry,) = owner_key_entries(keyring_backend.secrets)  # only alice has keys yet
    bob_row = vault.put(bob, "t", 1, "tool", "bob stays")
    owner_tag, before_delete = ledger_of(attacker, rep)
    vault.delete(alice, rep.id)
    attacker.restore_row(copy)
    attacker.write_ledger(owner_tag, before_delete)  # with her ledger from before the delete, reads cannot tell
    assert vault.get(alice, rep.id).content == CONTENT  # the copy is live while the keys exist
    del keyring_backend.secrets[alice_entry]
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as fresh:  # no cached keys
        with pytest.raises(KeyUnavailable):
            fresh.get(alice, rep.id)
        with pytest.raises(KeyUnavailable):
            fresh.list_for_turn(alice, "t")
        assert fresh.get(bob, bob_row.id).content == "bob stays"
