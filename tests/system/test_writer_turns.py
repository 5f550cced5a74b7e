"""Writers take turns in the order they came, and no writer can keep the others waiting without bound.

A write holds the write lock while it reads its observation, so a put of a stream that blocks is a writer
holding the lock for as long as the test wants, in this process or in a child (``holder_main``). Threads queued
behind it must then write in the order they queued (SQLite's busy handler alone lets the latest comer win); a
holder killed with SIGKILL must not block anyone (the lock files are flock locks, which die with their process);
one that hangs makes the others fail with StorageError after the wait bound, and close ends a wait at once.
Nothing here times anything: each step waits for the state it needs and asserts order and progress.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.file_keyring import FileKeyring
from tests.support.repository import calling, child_env
from vault import Principal, StorageError, Vault
from vault.storage.sqlite import writers

pytestmark = pytest.mark.sqlite_only("the SQLite store's one write lock and its queue of writers (vault/storage/sqlite/"
                                     "writers.py), observed through it; PostgreSQL has neither by design: writers of "
                                     "different owners never wait, one owner's queue on its advisory lock")
ALICE, CAROL = Principal("alice"), Principal("carol")
HOLDER = calling("tests.system.test_writer_turns.holder_main")


class BlockingStream:
    """A binary observation whose first read says so, then waits until ``release`` is set."""

    def __init__(self) -> None:
        self.inside, self.release = threading.Event(), threading.Event()
        self._done = False

    def read(self, _size: int = -1) -> bytes:
        if self._done:
            return b""
        self.inside.set()
        self.release.wait(120)
        self._done = True
        return b"held the write lock"


class StdinStream:
    """A binary observation read from stdin, announced on stdout first: the parent decides when it ends."""

    def read(self, size: int = -1) -> bytes:
        print("holding", flush=True)
        return sys.stdin.buffer.read(1)


def holder_main() -> None:
    """argv: db keyring; puts a row whose content never arrives (the parent kills or stops this process)."""
    db, keyring_file = sys.argv[1:]
    with Vault.open(db, keyring_backend=FileKeyring(keyring_file)) as vault:
        vault.put(CAROL, "held", 0, "holder", StdinStream())


def eventually(condition: Callable[[], bool], what: str) -> None:
    """Wait for a state (not a time): fail only if it never comes."""
    deadline = time.monotonic() + 120
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.002)


def waiting(vault: Vault) -> int:
    return vault._store._writers.waiting()


def in_thread(call: Callable[[], object], outcome: list) -> threading.Thread:
    def run() -> None:
        try:
            outcome.append(call())
        except StorageError as error:
            outcome.append(error)
    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_threads_waiting_to_write_write_in_the_order_they_came(vault, attacker):
    vault.put(ALICE, "t", 0, "tool", "the owner's keys exist")
    stream = BlockingStream()
    reps: dict[int, list] = {0: []}
    threads = [in_thread(lambda: vault.put(ALICE, "t", 1, "holder", stream), reps[0])]
    assert stream.inside.wait(60)
    for step in range(2, 8):
        reps[step] = []
        threads.append(in_thread(lambda s=step: vault.put(ALICE, "t", s, "tool", f"queued {s}"), reps[step]))
        eventually(lambda s=step: waiting(vault) == s - 1, f"writer {step} queued")
    stream.release.set()
    for thread in threads:
        thread.join(120)
    ids = [reps[step][0].id for step in (0, *range(2, 8))]
    seq_of = {row["id"].hex(): seq for seq, row in attacker.rows().items()}
    assert sorted(ids, key=seq_of.__getitem__) == ids  # committed in the order they queued


@pytest.fixture
def shared(tmp_path, db_path):
    keyring_file = tmp_path / "keyring.json"
    Vault.open(db_path, keyring_backend=FileKeyring(keyring_file)).close()
    return db_path, keyring_file


def start_holder(db: Path, keyring_file: Path) -> subprocess.Popen:
    """A child process inside a put, holding the write lock until it is killed."""
    child = subprocess.Popen([sys.executable, "-c", HOLDER, str(db), str(keyring_file)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=child_env())
    assert child.stdout.readline().strip() == "holding"
    return child


def kill(child: subprocess.Popen) -> None:
    os.kill(child.pid, signal.SIGKILL)
    child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL


def test_a_writer_killed_while_holding_the_lock_does_not_block_the_others(shared, attacker):
    db, keyring_file = shared
    with Vault.open(db, keyring_backend=FileKeyring(keyring_file)) as vault:
        vault.put(ALICE, "t", 0, "tool", "the owner's keys exist")
        holder = start_holder(db, keyring_file)
        outcome: list = []
        writer = in_thread(lambda: vault.put(ALICE, "t", 1, "tool", "after the holder"), outcome)
        eventually(lambda: waiting(vault) == 1, "the put waits for the other process")
        assert writer.is_alive() and outcome == []
        kill(holder)
        writer.join(120)
        assert not writer.is_alive() and vault.get(ALICE, outcome[0].id).content == "after the holder"
        assert len(attacker.rows()) == 2 and attacker.intact()  # alice's two rows; nothing of the holder's put
        assert vault.list_for_turn(CAROL, "held") == []


def test_a_hung_writer_makes_others_fail_with_storage_error_and_they_write_once_it_is_gone(shared, monkeypatch):
    db, keyring_file = shared
    monkeypatch.setattr(writers, "WRITE_WAIT", 0.5)  # the bound, shortened; nothing asserts how long it took
    with Vault.open(db, keyring_backend=FileKeyring(keyring_file)) as vault:
        vault.put(ALICE, "t", 0, "tool", "the owner's keys exist")
        holder = start_holder(db, keyring_file)
        os.kill(holder.pid, signal.SIGSTOP)  # hung, lock held
        try:
            for step in (1, 2):  # the second waits behind the first's abandoned claim: it must fail just the same
                with pytest.raises(StorageError, match="busy"):
                    vault.put(ALICE, "t", step, "tool", "while the holder hangs")
        finally:
            os.kill(holder.pid, signal.SIGCONT)
            kill(holder)
        rep = vault.put(ALICE, "t", 3, "tool", "once it is gone")
        assert vault.get(ALICE, rep.id).content == "once it is gone"
        assert [r.step_num for r in vault.list_for_turn(ALICE, "t")] == [0, 3]


def test_closing_the_vault_ends_a_wait_for_another_process_with_storage_error(shared):
    db, keyring_file = shared
    vault = Vault.open(db, keyring_backend=FileKeyring(keyring_file))
    vault.put(ALICE, "t", 0, "tool", "the owner's keys exist")
    holder = start_holder(db, keyring_file)
    try:
        outcome: list = []
        writer = in_thread(lambda: vault.put(ALICE, "t", 1, "tool", "waits"), outcome)
        eventually(lambda: waiting(vault) == 1, "the put waits for the other process")
        vault.close()
        writer.join(120)  # the holder still holds the lock: only close can have ended the wait
        assert not writer.is_alive() and isinstance(outcome[0], StorageError) and "closed" in str(outcome[0])
    finally:
        kill(holder)
