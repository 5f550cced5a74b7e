"""Threads on one Vault (a read racing a delete and a put included), processes on one file, a process killed
mid-write, and a turn resumed elsewhere.

Child processes run this module's ``child_main`` (``python -c``, the repository root on their PYTHONPATH) and
share keys through ``FileKeyring``, a flock-protected JSON file: the in-memory keyring cannot cross a process
boundary.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support.file_keyring import FileKeyring, entry, load
from tests.support.keyring_entries import owner_username
from tests.support.repository import calling, child_env
from vault import NotFound, Principal, Vault

ALICE, BOB = Principal("alice"), Principal("bob")

CHILD = calling("tests.system.test_concurrency.child_main")


def payload(tag: str, i: int):
    """Deterministic content of every kind, some of it several chunks long."""
    if i % 3 == 0:
        return bytes((i + k) % 256 for k in range(1000 + i * 37))
    if i % 3 == 1:
        return {"tag": tag, "i": i, "items": [f"{tag}-{k}" for k in range(i * 3)]}
    return f"{tag} row {i} é€\n" * (1 + i * 11 + (9000 if i % 10 == 2 else 0))


def child_main() -> None:
    """argv: db keyring user turn count [go-file]; prints "ready", waits for go-file, prints "<i> <id>" per put."""
    db, keyring_file, user, turn, count, *go = sys.argv[1:]
    with Vault.open(db, keyring_backend=FileKeyring(keyring_file)) as vault:
        print("ready", flush=True)
        while go and not os.path.exists(go[0]):
            time.sleep(0.005)
        for i in range(int(count)):
            rep = vault.put(Principal(user), turn, i, "child", payload(f"{user}/{turn}", i))
            print(i, rep.id, flush=True)


def spawn(*args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CHILD, *map(str, args)], stdout=subprocess.PIPE, text=True,
                            env=child_env())


def start_together(go: Path, *children: subprocess.Popen) -> None:
    for child in children:
        assert child.stdout.readline().strip() == "ready"
    go.touch()


def finish(child: subprocess.Popen) -> dict[int, str]:
    out, _ = child.communicate(timeout=60)
    assert child.returncode == 0
    return {int(i): row for i, row in (line.split() for line in out.splitlines())}


@pytest.fixture
def shared(tmp_path, db_path):
    """A vault file and a file keyring that processes share; the vault is created here, then closed."""
    keyring_file = tmp_path / "keyring.json"
    Vault.open(db_path, keyring_backend=FileKeyring(keyring_file)).close()
    return db_path, keyring_file


def owner_entries(keyring_file: Path, user: str) -> list[str]:
    entries = load(keyring_file)
    (index,) = [k.split("\0")[0] for k in entries if k.endswith("/index\0index")]
    name = owner_username(lambda service, username: entries.get(entry(service, username)), index, user)
    tag = name.split(".")[0]  # any version: whichever process won made it
    return [k for k in entries if f"/owner-key\0{tag}." in k]


def assert_rows_exact(vault, user, turn, ids):
    for i, row in ids.items():
        assert vault.get(Principal(user), row).content == payload(f"{user}/{turn}", i)


# -- threads -------------------------------------------------------------------------------------------
def test_eight_threads_mixed_put_read_list_on_one_vault(vault):
    written: dict[str, tuple[Principal, object]] = {}
    errors: list[BaseException] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def work(n: int) -> None:
        who = Principal("alice" if n % 2 else "bob")
        mine: list[str] = []
        try:
            start.wait()
            for i in range(25):
                if i % 3 == 0 or not mine:
                    content = payload(f"thread{n}", i)
                    mine.append(vault.put(who, f"turn-{n}", i, "tool", content).id)
                    with lock:
                        written[mine[-1]] = (who, content)
                elif i % 3 == 1:
                    assert vault.read(who, mine[i % len(mine)], mode="head", n=50).returned_size > 0
                else:
                    assert {r.id for r in vault.list_for_turn(who, f"turn-{n}")} == set(mine)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert vault.stats()["rows"] == len(written) >= 8 * 9
    for row, (who, content) in written.items():
        assert vault.get(who, row).content == content
        other = Principal("bob" if who.user_id == "alice" else "alice")
        with pytest.raises(NotFound):
            vault.read(other, row)


def test_threads_creating_the_same_new_owner_share_one_keyset(vault, db_path, keyring_backend, clock):
    start, ids, errors = threading.Barrier(8), {}, []

    def first_put(n: int) -> None:
        try:
            start.wait()
            ids[n] = vault.put(Principal("newcomer"), "t", n, "tool", f"from thread {n}").id
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=first_put, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    (index,) = [service for service, user in keyring_backend.secrets if user == "index"]
    tag = owner_username(keyring_backend.get_password, index, "newcomer").split(".")[0]
    (only,) = [user for service, user in keyring_backend.secrets if service.endswith("/owner-key")]
    assert only.startswith(tag + ".")
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as v:  # fresh cache: keys from keyring
        assert {n: v.get(Principal("newcomer"), row).content for n, row in ids.items()} == {
            n: f"from thread {n}" for n in range(8)}


def test_a_read_racing_a_delete_and_a_put_sees_one_consistent_row(vault, db_path, monkeypatch):
    """Another thread deletes alice's row and bob's put reuses its seq between two statements of alice's
    read: the read sees its snapshot (alice's content), never another row's chunks (a false tamper alarm)."""
    rep = vault.put(ALICE, "t", 1, "x", "alice data")
    reads_class = type(vault._store.snapshot())  # the store's snapshot class (SQLite's or PostgreSQL's)
    original = reads_class.read_chunks

    def racing(reads, seq, first, last):
        def other_thread():
            vault.delete(ALICE, rep.id)
            vault.put(BOB, "t", 1, "x", "bob data")
        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join()
        return original(reads, seq, first, last)

    monkeypatch.setattr(reads_class, "read_chunks", racing)
    assert vault.read(ALICE, rep.id).content == "alice data"
    monkeypatch.setattr(reads_class, "read_chunks", original)
    assert vault.stats()["counters"]["integrity_failures"] == 0
    with pytest.raises(NotFound):
        vault.read(ALICE, rep.id)


# -- processes -----------------------------------------------------------------------------------------
@pytest.mark.slow
def test_three_processes_thirty_puts_each_all_readable(shared, tmp_path):
    db, keyring_file = shared
    go = tmp_path / "go"
    children = {user: spawn(db, keyring_file, user, "t", 30, go) for user in ("ann", "ben", "cid")}
    start_together(go, *children.values())
    ids = {user: finish(child) for user, child in children.items()}
    with Vault.open(db, keyring_backend=FileKeyring(keyring_file)) as vault:
        assert vault.stats()["rows"] == 90
        for user, rows in ids.items():
            assert sorted(rows) == list(range(30))
            assert_rows_exact(vault, user, "t", rows)
            assert [r.id for r in vault.list_for_turn(Principal(user), "t")] == [rows[i] for i in range(30)]


@pytest.mark.slow
def test_two_processes_creating_the_same_new_owner_end_with_one_keyset(shared, tmp_path, attacker):
    db, keyring_file = shared
    go = tmp_path / "go"
    first, second = spawn(db, keyring_file, "dora", "t1", 5, go), spawn(db, keyring_file, "dora", "t2", 5, go)
    start_together(go, first, second)
    ids1, ids2 = finish(first), finish(second)
    assert len(owner_entries(keyring_file, "dora")) == 1
    assert len(attacker.commitments()) == 1
    with Vault.open(db, keyring_backend=FileKeyring(keyring_file)) as vault:
        assert_rows_exact(vault, "dora", "t1", ids1)
        assert_rows_exact(vault, "dora", "t2", ids2)


@pytest.mark.slow
def test_processes_creating_one_new_vault_agree_on_one_vault_id(tmp_path, db_path):
    keyring_file, go = tmp_path / "keyring.json", tmp_path / "go"
    children = [spawn(db_path, keyring_file, f"u{n}", "t", 3, go) for n in range(3)]
    start_together(go, *children)  # each opened (and so raced to create) the vault before "ready"
    ids = [finish(child) for child in children]
    entries = load(keyring_file)
    assert len([k for k in entries if k.endswith("/index\0index")]) == 1
    with Vault.open(db_path, keyring_backend=FileKeyring(keyring_file)) as vault:
        for n, rows in enumerate(ids):
            assert_rows_exact(vault, f"u{n}", "t", rows)


@pytest.mark.slow
def test_process_killed_mid_put_loses_no_returned_row_and_leaves_no_half_row(shared, attacker):
    db, keyring_file = shared
    child = spawn(db, keyring_file, "erin", "t", 100_000)
    assert child.stdout.readline().strip() == "ready"
    printed: dict[int, str] = {}
    while len(printed) < 25:
        i, row = child.stdout.readline().split()
        printed[int(i)] = row
    os.kill(child.pid, signal.SIGKILL)
    rest, _ = child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL
    printed |= {int(i): row for i, row in (line.split() for line in rest.splitlines() if len(line.split()) == 2)}
    attacker.settle()
    assert attacker.intact()
    stored = [(row["id"], seq) for seq, row in attacker.rows().items()]
    assert {seq for _, seq in stored} <= set(attacker.summaries())  # no row without its summary
    chunks = attacker.chunk_indexes()
    for _, seq in stored:
        assert len(chunks.get(seq, [])) >= 1
    with Vault.open(db, keyring_backend=FileKeyring(keyring_file)) as vault:
        assert len(stored) >= len(printed)
        assert_rows_exact(vault, "erin", "t", printed)
        for row_id, _ in stored:  # a row committed but not yet printed is complete too
            assert vault.get(Principal("erin"), row_id.hex()).turn_id == "t"


@pytest.mark.slow
def test_turn_resumed_in_another_process_lists_and_reads_its_rows(shared):
    db, keyring_file = shared
    child = spawn(db, keyring_file, "alice", "turn-9", 4)
    assert child.stdout.readline().strip() == "ready"
    ids = finish(child)
    with Vault.open(db, keyring_backend=FileKeyring(keyring_file)) as vault:
        listed = vault.list_for_turn(Principal("alice"), "turn-9")
        assert [(r.step_num, r.id) for r in listed] == sorted(ids.items())
        assert_rows_exact(vault, "alice", "turn-9", ids)
        assert vault.list_for_turn(Principal("bob"), "turn-9") == []


def test_closing_while_another_thread_waits_inside_sqlite_never_crashes(db_path, attacker, keyring_backend):
    """close() from one thread while another waits inside SQLite for the write lock (the situation in which
    the suite once crashed the interpreter): the waiting call ends with StorageError or completes, the
    process lives, and every later call is StorageError."""
    from vault import StorageError

    vault = Vault.open(db_path, keyring_backend=keyring_backend)
    alice = Principal("alice")
    vault.put(alice, "t", 0, "tool", "warm")
    outcomes: list[str] = []

    def blocked_put() -> None:
        try:
            vault.put(alice, "t", 1, "tool", "waits for the lock")
            outcomes.append("stored")
        except StorageError:
            outcomes.append("closed")

    worker = threading.Thread(target=blocked_put)
    with attacker.holding_the_write_lock():  # another process's write transaction
        worker.start()
        time.sleep(0.3)
        vault.close()
        time.sleep(0.1)
    worker.join(30)
    assert not worker.is_alive() and outcomes in (["closed"], ["stored"])
    with pytest.raises(StorageError):
        vault.put(alice, "t", 2, "tool", "after close")
