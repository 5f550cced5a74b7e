"""A writer SIGKILLed at random points, 50 times on one database: nothing acknowledged is lost, nothing
half-written is ever visible, and SQLite's integrity check passes after every kill. A rewrap killed half-way
leaves every row readable and resumes.

The child (``python -c``, the repository root on its PYTHONPATH, keys in a ``FileKeyring``) puts observations of
random sizes (1 B .. 300 KB, many of several 64 KiB chunks, ASCII text, binary and JSON) in a loop and prints
``<id> <sha256>`` after each put returns. Every content is a function of (iteration, step), so a row that was
committed but not yet acknowledged when the kill came can be checked too. After each kill the parent also
collects the expired rows (most rows get a short ttl, ~3% a long one and stay for the whole run), so the
database keeps freeing and reusing pages across crashes.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support.file_keyring import FileKeyring
from tests.support.repository import calling, child_env
from tests.support.tiers import crash_kills
from vault import Principal, Vault

ALICE = Principal("alice")

CHILD = calling("tests.system.test_crash.child_main")
KILLS = crash_kills(50)  # fewer in the quick tier (tests/support/tiers.py)
CHUNK = 64 * 1024  # plaintext bytes per chunk (row format v1); ASCII and binary content: bytes == units
SHORT_TTL, LONG_TTL = 1000, 2_000_000
ALPHABET = bytes.maketrans(bytes(range(256)), (b"abcdefghijklmnopqrstuvwxyz0123456789 ,.-" * 7)[:256])


def content(iteration: int, step: int) -> tuple[object, int]:
    """The observation of one put, and its ttl."""
    rng = random.Random(f"{iteration}/{step}")
    roll = rng.random()
    if roll < 0.3:
        size = rng.randint(CHUNK + 1, 300_000)  # two to five chunks
    elif roll < 0.4:
        size = rng.randint(1, 16)
    else:
        size = int(math.exp(rng.uniform(0, math.log(CHUNK))))
    ttl = LONG_TTL if rng.random() < 0.03 else SHORT_TTL
    kind = rng.choice(("binary", "text", "json"))
    if kind == "binary":
        return rng.randbytes(size), ttl
    text = rng.randbytes(size).translate(ALPHABET).decode()
    return (text if kind == "text" else {"iteration": iteration, "step": step, "text": text}), ttl


def digest(value: object) -> str:
    raw = value if isinstance(value, bytes) else (value if isinstance(value, str) else json.dumps(value)).encode()
    return hashlib.sha256(raw).hexdigest()


def user_of(iteration: int) -> str:
    return f"crash-user-{iteration % 7}"  # the first seven iterations each create an owner's keys


def child_main() -> None:
    """argv: db keyring iteration; prints "ready", then "<id> <sha256 of content>" after every put returns."""
    db, keyring_file, iteration = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with Vault.open(db, keyring_backend=FileKeyring(keyring_file)) as vault:
        os.write(1, b"ready\n")
        who = Principal(user_of(iteration))
        for step in range(1_000_000):
            observation, ttl = content(iteration, step)
            rep = vault.put(who, f"crash-{iteration}", step, "crash", observation, ttl_seconds=ttl)
            line = f"{rep.id} {digest(observation)}\n".encode()
            assert os.write(1, line) == len(line)  # one write: a kill cannot cut the line (PYTHONUNBUFFERED)


def run_and_kill(db: Path, keyring_file: Path, iteration: int, rng: random.Random) -> list[str]:
    """Start a child, SIGKILL it at a random point, return every line it printed."""
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(db), str(keyring_file), str(iteration)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env())
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in child.stdout], daemon=True)
    reader.start()
    printed = []
    if rng.random() < 0.1:  # anywhere from interpreter start-up through Vault.open to the first puts
        time.sleep(rng.uniform(0.0, 0.3))
    else:
        try:
            printed.append(lines.get(timeout=30))
        except queue.Empty:
            pass
        assert printed == ["ready\n"], f"child did not start: {child.poll()}, {printed!r}"
        time.sleep(rng.uniform(0.05, 0.4))
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    reader.join(timeout=30)  # the stdout pipe has only this reader; stderr is read once the child is gone
    errors = child.stderr.read()
    child.stdout.close()
    child.stderr.close()
    assert child.returncode == -signal.SIGKILL, f"the child ended before the kill: {errors[-2000:]}"
    while not lines.empty():
        printed.append(lines.get())
    assert all(line.endswith("\n") for line in printed), f"a line was cut short: {printed[-3:]}"
    return [line.strip() for line in printed]


def stored_layout(attacker) -> tuple[dict[int, bytes], dict[int, list[int]]]:
    """After a kill: integrity check, then {seq: id} and {seq: sorted chunk indexes}; no orphan parts."""
    assert attacker.intact()
    rows = {seq: row["id"] for seq, row in attacker.rows().items()}
    summaries = set(attacker.summaries())
    chunks = attacker.chunk_indexes()
    assert summaries == set(rows), "a summary without its row, or a row without its summary"
    assert set(chunks) <= set(rows), "chunks of a row that does not exist"
    return rows, chunks


@pytest.mark.slow
def test_writer_killed_at_random_points_loses_nothing_acknowledged_and_leaves_no_half_row(tmp_path, db_path,
                                                                                            attacker):
    keyring_file = tmp_path / "keyring.json"
    Vault.open(db_path, keyring_backend=FileKeyring(keyring_file)).close()
    rng = random.Random(int.from_bytes(os.urandom(4), "big"))
    expected: dict[str, tuple[str, str]] = {}  # acknowledged and not yet collected: id -> (user, sha256)
    totals = {"acknowledged": 0, "unacknowledged_committed": 0, "multi_chunk": 0, "collected": 0}
    for iteration in range(KILLS):
        printed = run_and_kill(db_path, keyring_file, iteration, rng)
        attacker.settle()
        acknowledged = dict(line.split() for line in printed if line != "ready")
        assert printed[:1] == ["ready"] or not acknowledged
        totals["acknowledged"] += len(acknowledged)
        expected |= {row: (user_of(iteration), sha) for row, sha in acknowledged.items()}
        rows, chunks = stored_layout(attacker)
        present = {row.hex(): seq for seq, row in rows.items()}
        assert set(expected) <= set(present), f"iteration {iteration}: acknowledged rows lost"
        short_lived: set[str] = set()
        with Vault.open(db_path, keyring_backend=FileKeyring(keyring_file)) as vault:
            for row, seq in present.items():
                if row in expected:
                    record = vault.get(Principal(expected[row][0]), row)
                    assert digest(record.content) == expected[row][1], f"iteration {iteration}: {row} altered"
                else:  # committed when the kill came, before it was printed: only this iteration's last put
                    record = vault.get(Principal(user_of(iteration)), row)
                    assert record.turn_id == f"crash-{iteration}", f"{row}: an unknown row from the past"
                    assert record.content == content(iteration, record.step_num)[0]
                    expected[row] = (user_of(iteration), digest(record.content))
                    totals["unacknowledged_committed"] += 1
                pieces = max(1, math.ceil(record.size_bytes / CHUNK))
                assert chunks.get(seq) == list(range(pieces)), f"{row}: chunks {chunks.get(seq)} of {pieces}"
                totals["multi_chunk"] += pieces > 1
                if record.expires_at - record.created_at == SHORT_TTL:
                    short_lived.add(row)
            collected = vault.gc(now=time.time() + 2 * SHORT_TTL)
        assert collected == len(short_lived)
        totals["collected"] += collected
        expected = {row: value for row, value in expected.items() if row not in short_lived}
    print(totals, f"{len(expected)} long-lived rows at the end")
    assert totals["acknowledged"] >= 10 * KILLS and totals["multi_chunk"] >= KILLS, totals
    assert expected, "no long-lived row survived to be checked across kills"


REWRAP_CHILD = """
import os, signal, sys
from tests.support.file_keyring import FileKeyring
from vault import Vault
if sys.argv[1].startswith("postgresql:"):
    from vault.storage.postgres.writes import PgWriteTx as WriteTx
else:
    from vault.storage.sqlite.store import SqliteWriteTx as WriteTx
updates = 0
original = WriteTx.update_wrapped_key
def dying(tx, seq, version, wrapped, summary):
    global updates
    updates += 1
    if updates == int(sys.argv[3]):
        os.kill(os.getpid(), signal.SIGKILL)  # mid-batch: that batch's transaction never commits
    original(tx, seq, version, wrapped, summary)
WriteTx.update_wrapped_key = dying
with Vault.open(sys.argv[1], keyring_backend=FileKeyring(sys.argv[2])) as vault:
    vault.rewrap("alice", batch=20)
"""


@pytest.mark.slow
def test_rewrap_killed_half_way_leaves_every_row_readable_and_resumes(tmp_path, db_path, attacker):
    ring_file = tmp_path / "ring.json"
    with Vault.open(db_path, keyring_backend=FileKeyring(ring_file)) as vault:
        ids = {vault.put(ALICE, "t", n, "x", f"row {n}").id: f"row {n}" for n in range(200)}
        vault.rotate_owner_key("alice")
    child = subprocess.run([sys.executable, "-c", REWRAP_CHILD, db_path, ring_file, "130"], capture_output=True,
                           timeout=60, check=False, env=child_env())
    assert child.returncode == -9
    attacker.settle()
    versions = attacker.key_versions()
    assert versions == {1: 80, 2: 120}  # six batches of 20 committed, the seventh rolled back
    assert attacker.intact()
    with Vault.open(db_path, keyring_backend=FileKeyring(ring_file)) as vault:
        assert {row: vault.get(ALICE, row).content for row in ids} == ids
        assert vault.rewrap("alice") == 80
        assert {vault.get(ALICE, row).key_version for row in ids} == {2}
