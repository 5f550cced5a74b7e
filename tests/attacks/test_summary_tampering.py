"""Attacks on stored summaries of format 3 (sealed under keys of the owner's turn and the expiry epoch): moved within
a turn, to another turn or owner, downgraded to format 2's or format 1's first byte, written back from before a
rewrap, or given another key version column;
each is an IntegrityError, counted, and deletes nothing; every other listing stays as it was. (A tampered summary
stopping rewrap is tests/attacks/test_damaged_rows.py.)"""

from __future__ import annotations

import pytest

from vault import IntegrityError, Principal

ALICE, BOB = Principal("alice"), Principal("bob")


def summary_of(attacker, row: str) -> bytes:
    return attacker.read(attacker.seq_of(row), "summary")


def set_summary(attacker, row: str, sealed: bytes) -> None:
    attacker.write(attacker.seq_of(row), "summary", sealed)


def put_world(vault) -> dict[str, str]:
    return {"t1": vault.put(ALICE, "t", 1, "web.fetch", "alice's first page " * 50).id,
            "t2": vault.put(ALICE, "t", 2, "ls", {"entries": [1, 2, 3], "count": 3, "status": "ok"}).id,
            "u1": vault.put(ALICE, "u", 1, "download", bytes(range(256))).id,
            "bob": vault.put(BOB, "t", 1, "web.fetch", "bob's page").id}


def move(source: str, target: str):
    return lambda vault, attacker, ids: set_summary(attacker, ids[target], summary_of(attacker, ids[source]))


def downgrade(first: bytes):  # format 3's first byte 0x05 made format 2's (0x04) or format 1's nonce domain (0x03)
    return lambda vault, attacker, ids: set_summary(attacker, ids["t1"], first + summary_of(attacker, ids["t1"])[1:])


def rollback_across_rewrap(vault, attacker, ids):
    old = summary_of(attacker, ids["t1"])
    vault.rotate_owner_key("alice")
    assert vault.rewrap("alice") == 3 and attacker.read(attacker.seq_of(ids["t1"]), "key_version") == 2
    set_summary(attacker, ids["t1"], old)


def new_version_column(version: int):
    def attack(vault, attacker, ids):
        vault.rotate_owner_key("alice")  # versions 1 and 2 both held; the row stays under 1
        attacker.write(attacker.seq_of(ids["t1"]), "key_version", version)
    return attack


ATTACKS = {  # name: (attack, target row, owner and turn of the target)
    "downgrade_0x05_to_0x04": (downgrade(b"\x04"), "t1", ALICE, "t"),
    "downgrade_0x05_to_0x03": (downgrade(b"\x03"), "t1", ALICE, "t"),
    "moved_within_turn": (move("t1", "t2"), "t2", ALICE, "t"),
    "moved_to_other_turn": (move("t1", "u1"), "u1", ALICE, "u"),
    "moved_to_other_owner": (move("t1", "bob"), "bob", BOB, "t"),
    "pre_rewrap_summary_written_back": (rollback_across_rewrap, "t1", ALICE, "t"),
    "key_version_column_to_held_version": (new_version_column(2), "t1", ALICE, "t"),
    "key_version_column_to_unknown_version": (new_version_column(9), "t1", ALICE, "t"),
}


@pytest.mark.parametrize("name", ATTACKS)
def test_tampered_summary_is_integrity_error_counted_and_never_deletes(vault, attacker, name):
    attack, target, owner, turn = ATTACKS[name]
    ids = put_world(vault)
    listings = {(p, t): vault.list_for_turn(p, t) for p in (ALICE, BOB) for t in ("t", "u")}
    seq = attacker.seq_of(ids[target])
    assert summary_of(attacker, ids[target])[0] == 0x05
    attack(vault, attacker, ids)
    failures = vault.stats()["counters"]["integrity_failures"]
    with pytest.raises(IntegrityError):
        vault.list_for_turn(owner, turn)
    with pytest.raises(IntegrityError):
        vault.get(owner, ids[target])
    assert vault.stats()["counters"]["integrity_failures"] == failures + 2
    assert attacker.read(seq, "id") is not None and attacker.read(seq, "summary") is not None  # nothing deleted
    for (p, t), listing in listings.items():  # every other listing is untouched
        if (p, t) != (owner, turn):
            assert vault.list_for_turn(p, t) == listing
