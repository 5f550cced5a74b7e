"""Concurrency soak: 4 processes x mixed put/get/read/list/delete/gc/extend_turn on one database for ~8 s.

Each process has two principals of its own and shares one with every other process. Each tracks what it
knows: its acknowledged rows, their expiry as an interval [lo, hi] (a call's clock is only known to lie between
the times before and after it), and its deletions. A NotFound is expected only for a row that expired (own
rows) or that some process deleted (shared rows, checked by the parent against every process's deletions);
anything else, and any other exception, is an error. Afterwards every acknowledged, undeleted, unexpired row
must read back exact.
"""

from __future__ import annotations

import io
import json
import os
import random
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

import pytest

from tests.support.clock import FakeClock
from tests.support.file_keyring import FileKeyring
from tests.support.repository import calling, child_env
from vault import NotFound, Principal, Vault

CHILD = calling("tests.system.test_soak.soak_main")
PROCESSES, SECONDS = 4, 8.0
SHARED, SHARED_TURNS, OWN_TURNS = "shared", ("s0", "s1"), ("t0", "t1", "t2")
OPS = {"put": 30, "get": 20, "read": 10, "list": 15, "delete": 10, "gc": 5, "extend": 10}


def observation(seed: str) -> object:
    """Deterministic content of a put (recomputable by any process from the executor name and step)."""
    rng = random.Random(seed)
    size = rng.choice((rng.randint(1, 2000), rng.randint(1, 20_000), rng.randint(70_000, 150_000)))
    kind = rng.choice(("text", "binary", "json"))
    if kind == "binary":
        return rng.randbytes(size)
    text = "".join(rng.choice("abcdefghij é€\n") for _ in range(min(size, 3000))) * (1 + size // 3000)
    return text if kind == "text" else {"seed": seed, "lines": text.splitlines()[:200]}


class Worker:
    """One soak process's state and operations."""

    def __init__(self, vault: Vault, number: int) -> None:
        self.vault, self.number = vault, number
        self.rng = random.Random(number)
        self.own = [Principal(f"p{number}-a"), Principal(f"p{number}-b", actor="x")]
        self.rows: dict[str, dict] = {}  # id -> user, turn, seed, lo, hi, deleted
        self.shared_seen: set[str] = set()
        self.deleted: list[str] = []
        self.shared_not_found: list[str] = []
        self.errors: list[str] = []
        self.counts = dict.fromkeys(OPS, 0)
        self.step = 0

    def error(self, message: str) -> None:
        self.errors.append(message)

    def live_own(self) -> list[str]:
        return [i for i, row in self.rows.items() if not row["deleted"] and row["user"] != SHARED]

    # -- operations --------------------------------------------------------------------------------------
    def put(self) -> None:
        shared = self.rng.random() < 0.25
        who = Principal(SHARED) if shared else self.rng.choice(self.own)
        turn = self.rng.choice(SHARED_TURNS if shared else OWN_TURNS)
        ttl = 600.0 if shared else self.rng.choice((1.5, 3.0, 600.0))
        self.step += 1
        seed = f"p{self.number}/{self.step}"
        rep = self.vault.put(who, turn, self.step, f"p{self.number}", observation(seed), ttl_seconds=ttl)
        self.rows[rep.id] = {"user": who.user_id, "turn": turn, "seed": seed, "lo": rep.expires_at,
                             "hi": rep.expires_at, "deleted": False}

    def get(self, mode: str | None = None) -> None:
        if self.shared_seen and self.rng.random() < 0.3:
            row_id = self.rng.choice(sorted(self.shared_seen))
            try:
                record = self.vault.get(Principal(SHARED), row_id)
            except NotFound:
                self.shared_not_found.append(row_id)  # the parent checks someone deleted it
                return
            if record.content != observation(f"{record.executor_name}/{record.step_num}"):
                self.error(f"shared row {row_id} altered")
            return
        mine = self.live_own()
        if not mine:
            return
        row_id = self.rng.choice(mine)
        row, before = self.rows[row_id], time.time()
        try:
            if mode is None:
                got = self.vault.get(Principal(row["user"]), row_id).content
                want = observation(row["seed"])
            else:
                got = self.vault.read(Principal(row["user"]), row_id, mode=mode, n=500).returned_size
                want = got
        except NotFound:
            if time.time() < row["lo"]:
                self.error(f"own row {row_id} NotFound before its expiry")
            return
        if before >= row["hi"]:
            self.error(f"own row {row_id} readable after its expiry")
        if got != want:
            self.error(f"own row {row_id} altered")

    def list(self) -> None:
        if self.rng.random() < 0.4:
            turn = self.rng.choice(SHARED_TURNS)
            self.shared_seen |= {rep.id for rep in self.vault.list_for_turn(Principal(SHARED), turn)}
            return
        who, turn = self.rng.choice(self.own), self.rng.choice(OWN_TURNS)
        before = time.time()
        listed = {rep.id for rep in self.vault.list_for_turn(who, turn)}
        after = time.time()
        for row_id, row in self.rows.items():
            if (row["user"], row["turn"]) != (who.user_id, turn):
                continue
            surely_live = not row["deleted"] and row["lo"] > after
            surely_gone = row["deleted"] or row["hi"] <= before
            if (surely_live and row_id not in listed) or (surely_gone and row_id in listed):
                self.error(f"listing of {turn} wrong about {row_id}")
        if not listed <= set(self.rows):
            self.error(f"listing of {turn} shows rows this process never put")

    def delete(self) -> None:
        if self.shared_seen and self.rng.random() < 0.3:
            row_id = self.rng.choice(sorted(self.shared_seen))
            try:
                self.vault.delete(Principal(SHARED), row_id)
                self.deleted.append(row_id)
            except NotFound:
                self.shared_not_found.append(row_id)
            self.shared_seen.discard(row_id)
            return
        mine = self.live_own()
        if not mine:
            return
        row_id = self.rng.choice(mine)
        row, before = self.rows[row_id], time.time()
        try:
            self.vault.delete(Principal(row["user"]), row_id)
        except NotFound:
            if time.time() < row["lo"]:
                self.error(f"own row {row_id} could not be deleted before its expiry")
            return
        if before >= row["hi"]:
            self.error(f"own row {row_id} deletable after its expiry")
        row["deleted"] = True
        self.deleted.append(row_id)

    def gc(self) -> None:
        if self.vault.gc() < 0:
            self.error("gc returned a negative count")

    def extend(self) -> None:
        if self.rng.random() < 0.2:  # shared rows live 600 s: a 5 s extension must not shorten any
            if self.vault.extend_turn(Principal(SHARED), self.rng.choice(SHARED_TURNS), 5.0) != 0:
                self.error("extend_turn shortened or touched a longer-lived shared row")
            return
        who, turn, ttl = self.rng.choice(self.own), self.rng.choice(OWN_TURNS), self.rng.choice((2.0, 5.0))
        before = time.time()
        count = self.vault.extend_turn(who, turn, ttl)
        after = time.time()
        surely, possibly = 0, 0
        for row in self.rows.values():
            if (row["user"], row["turn"]) != (who.user_id, turn) or row["deleted"] or row["hi"] <= before:
                continue
            surely += row["lo"] > after and row["hi"] < before + ttl
            possibly += row["lo"] < after + ttl
            if row["lo"] > after:
                row["lo"] = max(row["lo"], before + ttl)
            row["hi"] = max(row["hi"], after + ttl)
        if not surely <= count <= possibly:
            self.error(f"extend_turn extended {count} rows, expected {surely}..{possibly}")

    def run(self, deadline: float) -> None:
        names, weights = list(OPS), list(OPS.values())
        while time.time() < deadline:
            name = self.rng.choices(names, weights)[0]
            self.counts[name] += 1
            try:
                if name == "read":
                    self.get(self.rng.choice(("head", "tail", "full")))
                else:
                    getattr(self, name)()
            except Exception:
                self.error(f"{name}: {traceback.format_exc(limit=3)}")


def soak_main() -> None:
    """argv: db keyring number go-file seconds result-file."""
    db, keyring_file, number, go, seconds, result = sys.argv[1:]
    with Vault.open(db, keyring_backend=FileKeyring(keyring_file)) as vault:
        worker = Worker(vault, int(number))
        print("ready", flush=True)
        while not os.path.exists(go):
            time.sleep(0.005)
        worker.run(time.time() + float(seconds))
    Path(result).write_text(json.dumps({k: getattr(worker, k) for k in (
        "rows", "deleted", "shared_not_found", "errors", "counts")}))


@pytest.mark.slow
def test_four_processes_mixed_operations_lose_nothing_and_raise_nothing_unexpected(tmp_path, db_path, attacker):
    keyring_file, go = tmp_path / "keyring.json", tmp_path / "go"
    Vault.open(db_path, keyring_backend=FileKeyring(keyring_file)).close()
    results = [tmp_path / f"result-{n}.json" for n in range(PROCESSES)]
    children = [subprocess.Popen([sys.executable, "-c", CHILD, str(db_path), str(keyring_file), str(n), str(go),
                                  str(SECONDS), str(results[n])], stdout=subprocess.PIPE, text=True,
                                 env=child_env())
                for n in range(PROCESSES)]
    for child in children:
        assert child.stdout.readline().strip() == "ready"
    go.touch()
    for child in children:
        child.communicate(timeout=SECONDS + 60)
        assert child.returncode == 0
    reports = [json.loads(path.read_text()) for path in results]
    assert [r["errors"] for r in reports] == [[]] * PROCESSES
    for report in reports:
        assert all(count >= 5 for count in report["counts"].values()), report["counts"]
    deleted = {row for report in reports for row in report["deleted"]}
    assert len(deleted) == sum(len(r["deleted"]) for r in reports), "one row deleted twice"
    unexplained = {row for report in reports for row in report["shared_not_found"]} - deleted
    assert unexplained == set(), "shared rows NotFound that nobody deleted"
    assert attacker.intact()
    checked = 0
    clock = FakeClock(time.time())  # one instant for the whole check: a loaded machine may take seconds over it
    with Vault.open(db_path, keyring_backend=FileKeyring(keyring_file), clock=clock) as vault:
        now = clock.now
        for report in reports:
            for row_id, row in report["rows"].items():
                if row_id in deleted or row["lo"] <= now:
                    continue
                assert vault.get(Principal(row["user"]), row_id).content == observation(row["seed"]), row_id
                checked += 1
        for row_id in deleted:
            with pytest.raises(NotFound):
                vault.get(Principal(SHARED), row_id)
    print([r["counts"] for r in reports], f"{len(deleted)} deleted, {checked} checked at the end")
    assert checked >= 50, f"only {checked} rows left to check"


class BlockingStream(io.RawIOBase):
    """A binary observation whose first read blocks until released: its put holds the write lock meanwhile."""

    def __init__(self) -> None:
        self.reading, self.release = threading.Event(), threading.Event()

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        self.reading.set()
        self.release.wait(30)
        return b""


def test_extend_turn_waiting_for_the_write_lock_does_not_revive_a_row_that_expired_meanwhile(db_path,
                                                                                             keyring_backend):
    clock, alice = FakeClock(), Principal("alice")
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault:
        row = vault.put(alice, "t", 1, "tool", "short-lived", ttl_seconds=10)
        stream = BlockingStream()
        writer = threading.Thread(target=vault.put, args=(alice, "other", 1, "tool", stream))
        writer.start()
        assert stream.reading.wait(10)  # the writer now holds the database write lock
        extended: list[int] = []
        waiting = threading.Thread(target=lambda: extended.append(vault.extend_turn(alice, "t", 3600)))
        waiting.start()
        time.sleep(0.3)  # extend_turn is now waiting for the write lock
        clock.advance(20)  # the row expires while extend_turn waits
        with pytest.raises(NotFound):
            vault.get(alice, row.id)
        stream.release.set()
        writer.join(30)
        waiting.join(30)
        assert not writer.is_alive() and not waiting.is_alive()
        with pytest.raises(NotFound):
            vault.get(alice, row.id)  # expired rows stay expired
        assert extended == [0]
