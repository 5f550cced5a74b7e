"""Upgrades to row format 3: rows of several owners written by the release before it (``FORMAT_2_RELEASE``:
format 2, data keys under the owner key alone, schema 5, run in its own process) read and list here; doctor counts
them as rows under no expiry epoch; extend_turn and rewrap move them into the epoch of their expiry; and once those
epochs have ended and gc destroyed their keys, a copy of the file taken after the rewrap no longer opens them though
every owner key is still in the keyring, while a row of a later epoch in the same copy still does.
threat_model.md, "Row format 3"."""

from __future__ import annotations

import base64
import time
from pathlib import Path

import pytest

from tests.attacks.sqlite_attacker import SqliteAttacker
from tests.support.clock import FakeClock
from tests.support.file_keyring import FileKeyring, load
from tests.system.releases import Previous, release_tree
from vault import KeyUnavailable, NotFound, Principal, Vault
from vault.ops.doctor import diagnose

FORMAT_2_RELEASE = "4074bf0"  # the last commit before row format 3: format 2 rows, SQLite schema 5
ALICE, BOB, CAROL = Principal("alice"), Principal("bob"), Principal("carol")
BINARY = bytes(range(256)) * 3
SKEW, HOUR, DAY = 300, 3600, 86400


@pytest.fixture(scope="module")
def format_2_tree(tmp_path_factory) -> Path:
    return release_tree(tmp_path_factory, FORMAT_2_RELEASE)


def written_by_the_release_before(tree: Path, db: Path, ring: Path) -> dict[str, tuple[Principal, object]]:
    """Rows of three owners, text, JSON and binary, some extended by the release before: id -> (owner, content)."""
    old = Previous(tree, db, ring)
    try:
        assert old.opened == 5
        rows = {old("put_for", "alice", 1, "alice's text ✓", HOUR): (ALICE, "alice's text ✓"),
                old("put_for", "alice", 2, {"k": [1, 2.5, "é"]}, HOUR): (ALICE, {"k": [1, 2.5, "é"]}),
                old("put_bytes", "bob", 1, base64.b64encode(BINARY).decode(), HOUR): (BOB, BINARY),
                old("put_for", "bob", 2, "bob's text", 1800): (BOB, "bob's text"),
                old("put_for", "carol", 1, ["carol", "json"], HOUR): (CAROL, ["carol", "json"])}
        assert old("extend", "alice", 2 * HOUR) == 2  # re-sealed by the release before: still format 2
        return rows
    finally:
        old.close()


def doctor_epoch_lines(db: Path) -> list[str]:
    return [line for line in diagnose(db)[0] if "expiry epoch" in line]


def formats(attacker: SqliteAttacker) -> list[tuple[int, int, int]]:
    """(wrapped key size, its first byte, the summary's first byte) of every stored row, by seq."""
    summaries = attacker.summaries()
    return [(len(row["wrapped_key"]), row["wrapped_key"][0], summaries[seq][0]) for seq, row in attacker.rows().items()]


def reads_and_lists(vault: Vault, rows: dict[str, tuple[Principal, object]]) -> None:
    for row_id, (who, content) in rows.items():
        assert vault.get(who, row_id).content == content
    for who in (ALICE, BOB, CAROL):
        assert {r.id for r in vault.list_for_turn(who, "t")} == {i for i, (w, _) in rows.items() if w == who}


def test_format_2_rows_of_the_release_before_are_moved_into_epochs_and_their_copies_die_with_them(
        format_2_tree, ring, vault_dir):
    db, backup = vault_dir / "format2.db", vault_dir / "backup.db"
    rows = written_by_the_release_before(format_2_tree, db, ring)
    attacker, clock = SqliteAttacker(db), FakeClock(time.time())
    assert {(size, summary) for size, _, summary in formats(attacker)} == {(60, 0x04)}
    assert "rows under no expiry epoch 5" in doctor_epoch_lines(db)[0]
    assert any(line.startswith("WARN") and "5 row(s) written before format 3" in line for line in
               doctor_epoch_lines(db))
    with Vault.open(db, keyring_backend=FileKeyring(), clock=clock) as vault:
        reads_and_lists(vault, rows)
        assert vault.extend_turn(CAROL, "t", 2 * DAY) == 1  # a format 2 row extended: format 3, in a later epoch
        carol = [row_id for row_id, (who, _) in rows.items() if who == CAROL]
        assert formats(attacker)[-1] == (65, 0x03, 0x05) and attacker.rows()[max(attacker.rows())]["id"].hex() in carol
        assert "rows under no expiry epoch 4" in doctor_epoch_lines(db)[0]
        assert vault.rewrap() == 4
        assert formats(attacker) == [(65, 0x03, 0x05)] * 5
        reads_and_lists(vault, rows)
    lines = doctor_epoch_lines(db)
    assert "rows under no expiry epoch 0" in lines[0] and not any(line.startswith("WARN") for line in lines)
    attacker.copy_file(backup)  # a backup taken after the rewrap, every row still live
    owner_keys = sorted(name for name in load(ring) if "/owner-key\0" in name)
    latest = max(row["expires_at"] for row in attacker.rows().values() if row["id"].hex() not in carol)
    clock.now = (int(latest) // HOUR + 1) * HOUR + SKEW  # the end of the last epoch those rows expire in, + skew
    with Vault.open(db, keyring_backend=FileKeyring(), clock=clock) as vault:
        assert vault.gc() == 4
    assert sorted(name for name in load(ring) if "/owner-key\0" in name) == owner_keys  # every owner key is there
    assert len([name for name in load(ring) if "/epoch-key\0" in name and not name.endswith("-through")]
               ) == 1  # carol's epoch alone (beside the marker of those destroyed)
    for moment in (clock.now, time.time()):  # by the clock, and with the clock wound back to when the copy was made
        with Vault.open(backup, keyring_backend=FileKeyring(), clock=FakeClock(moment)) as vault:
            for row_id, (who, content) in rows.items():
                if who == CAROL:
                    assert vault.get(who, row_id).content == content
                    continue
                with pytest.raises((NotFound, KeyUnavailable)):  # NotFound is meant: tests/vault/test_epoch_backups.py
                    vault.get(who, row_id)
            assert [r.id for r in vault.list_for_turn(CAROL, "t")] == carol
