"""Expiry epochs across real processes (threat_model.md, "Expiry epochs"): a gc killed between deleting an
epoch's key from the keyring and deleting its rows, finished by the next gc in a fresh process; and two processes
putting rows into the same brand-new epoch at once, which ends with one key in the keyring.

Children run this module's ``child_main`` (``python -c``, the repository root on their PYTHONPATH), share keys
through ``FileKeyring`` (a flock-protected JSON file) and each has a fixed clock given on its command line. They open
``db_path``: a file, or with SCRATCHVAULT_TEST_STORE=postgres the test schema's URL, so both stores are covered."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from keyring.backend import KeyringBackend

from tests.support.clock import T0, FakeClock
from tests.support.epochs import SKEW, E, assert_nothing_of
from tests.support.file_keyring import FileKeyring, load
from tests.support.repository import calling, child_env
from vault import Principal, Vault

ALICE = Principal("alice")
CHILD = calling("tests.system.test_epoch_processes.child_main")
CRASHED = 17
ROUNDS = 4  # new epochs the racing children meet at once


class DiesAfterEpochKeyDelete(FileKeyring):
    """A FileKeyring whose process dies (no clean-up, as kill -9) right after the first epoch key it deletes."""

    def delete_password(self, service: str, username: str) -> None:
        super().delete_password(service, username)
        if service.endswith("/epoch-key"):
            os._exit(CRASHED)


KeyringBackend._classes.discard(DiesAfterEpochKeyDelete)


def child_main() -> None:
    """argv: mode db keyring now [go-dir]. ``gc-dies``: gc with DiesAfterEpochKeyDelete; ``gc``: gc, prints the rows
    removed and the integrity failures counted; ``race``: per round waits for go-dir/<round>, puts a row expiring in
    epoch 500,002 + round and prints its id, then reads ids from stdin and prints each row's content."""
    mode, db, keyring_file, now, *go = sys.argv[1:]
    ring = (DiesAfterEpochKeyDelete if mode == "gc-dies" else FileKeyring)(keyring_file)
    with Vault.open(db, keyring_backend=ring, clock=lambda: float(now)) as vault:
        if mode.startswith("gc"):
            removed = vault.gc()
            print(removed, vault.stats()["counters"]["integrity_failures"], flush=True)
            return
        print("ready", flush=True)
        for turn in range(ROUNDS):
            while not os.path.exists(os.path.join(go[0], str(turn))):
                time.sleep(0.002)
            print(vault.put(ALICE, "t", turn, "child", f"{os.getpid()} {turn}", ttl_seconds=(2 + turn) * E).id,
                  flush=True)
        for line in sys.stdin:
            print(vault.get(ALICE, line.strip()).content, flush=True)


def run_child(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CHILD, *map(str, args)], capture_output=True, text=True,
                          env=child_env(), timeout=120)


def epoch_entries(keyring_file: Path) -> list[str]:
    """The epoch keys' entries in a file keyring (not the destroyed-through marker beside them, which holds none)."""
    names = [key.split("\0") for key in load(keyring_file)]
    return sorted(user for service, user in names
                  if service.endswith("/epoch-key") and not user.endswith("-through"))


def test_a_gc_killed_between_the_key_delete_and_the_row_delete_is_finished_by_the_next_gc(
        db_path, tmp_path, attacker, attacker_for, location_named):
    keyring_file, clock = tmp_path / "keyring.json", FakeClock()
    with Vault.open(db_path, keyring_backend=FileKeyring(keyring_file), clock=clock) as vault:
        short = [vault.put(ALICE, "t", step, "tool", f"short {step}: the dentist is on Tuesday", ttl_seconds=600).id
                 for step in range(2)]
        long = vault.put(ALICE, "t", 9, "tool", "long", ttl_seconds=2 * E).id
    backup = location_named("backup.db")
    attacker.copy_file(backup)
    died = run_child("gc-dies", db_path, keyring_file, T0 + E + SKEW)
    attacker.settle()
    assert died.returncode == CRASHED, died.stderr
    assert epoch_entries(keyring_file) == [f"{E}.500002.1"]  # the key is gone ...
    assert attacker.row_ids() == {*short, long}  # ... its rows are not
    clock.now = T0 + 1
    with Vault.open(db_path, keyring_backend=FileKeyring(keyring_file), clock=clock) as vault:
        for row_id in short:  # nothing of them opens, even with the clock wound back
            assert_nothing_of(vault, ALICE, row_id, marker="dentist")
        assert vault.get(ALICE, long).content == "long"
    finished = run_child("gc", db_path, keyring_file, T0 + E + SKEW + 30)
    assert finished.returncode == 0 and finished.stdout.split() == ["2", "0"], finished.stderr
    assert attacker.row_ids() == {long} and epoch_entries(keyring_file) == [f"{E}.500002.1"]
    with Vault.open(backup, keyring_backend=FileKeyring(keyring_file), clock=clock) as copy:
        for row_id in short:
            assert_nothing_of(copy, ALICE, row_id, marker="dentist")
        assert copy.get(ALICE, long).content == "long"
    assert attacker_for(backup).row_ids() == {*short, long}


def test_two_processes_meeting_a_new_epoch_at_once_leave_one_key_and_read_each_others_rows(db_path, tmp_path,
                                                                                            attacker):
    keyring_file, go = tmp_path / "keyring.json", tmp_path / "go"
    go.mkdir()
    with Vault.open(db_path, keyring_backend=FileKeyring(keyring_file), clock=FakeClock()) as vault:
        vault.put(ALICE, "t", 99, "tool", "alice's keys exist", ttl_seconds=60)  # epoch 500,000: only that key
    children = [subprocess.Popen([sys.executable, "-c", CHILD, "race", str(db_path), str(keyring_file),
                                  str(T0 + 10), str(go)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                 env=child_env()) for _ in range(2)]
    try:
        assert [child.stdout.readline().strip() for child in children] == ["ready", "ready"]
        ids = []
        for turn in range(ROUNDS):  # both wait on the same file, then make the epoch's first key together
            (go / str(turn)).touch()
            ids += [child.stdout.readline().strip() for child in children]
        outputs = [child.communicate("\n".join(ids) + "\n", timeout=120)[0].split("\n") for child in children]
    finally:
        for child in children:
            child.kill() if child.poll() is None else None
    assert [child.returncode for child in children] == [0, 0] and len(set(ids)) == 2 * ROUNDS
    expected = [f"{child.pid} {turn}" for turn in range(ROUNDS) for child in children]
    assert [output[:-1] for output in outputs] == [expected, expected]
    assert epoch_entries(keyring_file) == sorted(
        [f"{E}.500000.1"] + [name for turn in range(ROUNDS) for name in _one_attempt(keyring_file, 500_002 + turn)])
    # the race was met: a round's loser reserved an attempt, found the winner's key and tombstoned its own unwritten
    assert attacker.query("SELECT count(*) FROM epoch_tombstones WHERE epoch >= 500002")[0][0] >= 1


def _one_attempt(keyring_file: Path, epoch: int) -> list[str]:
    """The one entry of ``epoch`` (whichever attempt won)."""
    names = [name for name in epoch_entries(keyring_file) if name.startswith(f"{E}.{epoch}.")]
    assert len(names) == 1, names
    return names
