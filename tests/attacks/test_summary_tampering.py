"""Attacks on stored summaries of format 2 (under turn keys): moved within a turn, to another turn or owner,
downgraded to format 1's nonce domain, written back from before a rewrap, or given another key version column;
each is an IntegrityError, counted, and deletes nothing. A tampered summary stops rewrap and rolls its batch back."""

from __future__ import annotations

import sqlite3
from contextlib import closing

import pytest

from vault import IntegrityError, Principal

ALICE, BOB = Principal("alice"), Principal("bob")


def sql(db_path, statement: str, *args) -> list[tuple]:
    with closing(sqlite3.connect(db_path)) as conn, conn:
        return conn.execute(statement, args).fetchall()


def seq_of(db_path, row: str) -> int:
    return sql(db_path, "SELECT seq FROM rows WHERE id = ?", bytes.fromhex(row))[0][0]


def summary_blob(db_path, row: str) -> bytes:
    return sql(db_path, "SELECT sealed FROM summaries WHERE seq = ?", seq_of(db_path, row))[0][0]


def set_summary(db_path, row: str, blob: bytes) -> None:
    sql(db_path, "UPDATE summaries SET sealed = ? WHERE seq = ?", blob, seq_of(db_path, row))


def key_version(db_path, row: str) -> int:
    return sql(db_path, "SELECT key_version FROM rows WHERE id = ?", bytes.fromhex(row))[0][0]


def put_world(vault) -> dict[str, str]:
    return {"t1": vault.put(ALICE, "t", 1, "web.fetch", "alice's first page " * 50).id,
            "t2": vault.put(ALICE, "t", 2, "ls", {"entries": [1, 2, 3], "count": 3, "status": "ok"}).id,
            "u1": vault.put(ALICE, "u", 1, "download", bytes(range(256))).id,
            "bob": vault.put(BOB, "t", 1, "web.fetch", "bob's page").id}


def move(source: str, target: str):
    return lambda vault, db, ids: set_summary(db, ids[target], summary_blob(db, ids[source]))


def downgrade(vault, db, ids):  # format 2's first byte 0x04 made format 1's nonce domain 0x03
    set_summary(db, ids["t1"], b"\x03" + summary_blob(db, ids["t1"])[1:])


def rollback_across_rewrap(vault, db, ids):
    old = summary_blob(db, ids["t1"])
    vault.rotate_owner_key("alice")
    assert vault.rewrap("alice") == 3 and key_version(db, ids["t1"]) == 2
    set_summary(db, ids["t1"], old)


def new_version_column(version: int):
    def attack(vault, db, ids):
        vault.rotate_owner_key("alice")  # versions 1 and 2 both held; the row stays under 1
        sql(db, "UPDATE rows SET key_version = ? WHERE id = ?", version, bytes.fromhex(ids["t1"]))
    return attack


ATTACKS = {  # name: (attack, target row, owner and turn of the target)
    "downgrade_0x04_to_0x03": (downgrade, "t1", ALICE, "t"),
    "moved_within_turn": (move("t1", "t2"), "t2", ALICE, "t"),
    "moved_to_other_turn": (move("t1", "u1"), "u1", ALICE, "u"),
    "moved_to_other_owner": (move("t1", "bob"), "bob", BOB, "t"),
    "pre_rewrap_summary_written_back": (rollback_across_rewrap, "t1", ALICE, "t"),
    "key_version_column_to_held_version": (new_version_column(2), "t1", ALICE, "t"),
    "key_version_column_to_unknown_version": (new_version_column(9), "t1", ALICE, "t"),
}


@pytest.mark.parametrize("name", ATTACKS)
def test_tampered_format_2_summary_is_integrity_error_counted_and_never_deletes(vault, db_path, name):
    attack, target, owner, turn = ATTACKS[name]
    ids = put_world(vault)
    listings = {(p, t): vault.list_for_turn(p, t) for p in (ALICE, BOB) for t in ("t", "u")}
    seq = seq_of(db_path, ids[target])
    assert summary_blob(db_path, ids[target])[0] == 0x04
    attack(vault, db_path, ids)
    failures = vault.stats()["counters"]["integrity_failures"]
    with pytest.raises(IntegrityError):
        vault.list_for_turn(owner, turn)
    with pytest.raises(IntegrityError):
        vault.get(owner, ids[target])
    assert vault.stats()["counters"]["integrity_failures"] == failures + 2
    assert sql(db_path, "SELECT count(*) FROM rows JOIN summaries USING (seq) WHERE seq = ?", seq) == [(1,)]
    for (p, t), listing in listings.items():  # every other listing is untouched
        if (p, t) != (owner, turn):
            assert vault.list_for_turn(p, t) == listing


# -- rewrap --------------------------------------------------------------------------------------------------
def summaries_seen(vault, ids) -> dict[str, tuple]:
    return {row: (vault.get(ALICE, row).summary, vault.get(ALICE, row).retained) for row in ids}


def test_a_tampered_summary_stops_rewrap_and_rolls_its_batch_back(vault, db_path):
    rows = [vault.put(ALICE, "t", n, "x", f"row {n}").id for n in range(4)]
    bad = vault.put(ALICE, "bad", 1, "x", "tampered").id
    listing, seen = vault.list_for_turn(ALICE, "t"), summaries_seen(vault, rows)
    before = sql(db_path, "SELECT seq, key_version, wrapped_key, sealed FROM rows JOIN summaries USING (seq)")
    blob = bytearray(summary_blob(db_path, bad))
    blob[len(blob) // 2] ^= 0x01
    set_summary(db_path, bad, bytes(blob))
    vault.rotate_owner_key("alice")
    with pytest.raises(IntegrityError):
        vault.rewrap("alice")
    after = sql(db_path, "SELECT seq, key_version, wrapped_key, sealed FROM rows JOIN summaries USING (seq)")
    assert [r for r in after if r[0] != seq_of(db_path, bad)] == [r for r in before if r[0] != seq_of(db_path, bad)]
    assert {key_version(db_path, row) for row in [*rows, bad]} == {1}
    assert vault.list_for_turn(ALICE, "t") == listing and summaries_seen(vault, rows) == seen
    with pytest.raises(IntegrityError):
        vault.get(ALICE, bad)
    with pytest.raises(IntegrityError):
        vault.list_for_turn(ALICE, "bad")
