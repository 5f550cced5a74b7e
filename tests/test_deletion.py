"""Deletion leaves nothing decryptable, even after the b-tree has moved cells around; and the storage edge
cases a security review found: a reader blocking the checkpoint, a concurrent delete during a read, a
database without its vault id, a database file or ancestor directory swapped under the vault."""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import threading
import time

import pytest

from vault import IntegrityError, NotFound, Principal, UnsafeStorage, Vault
from vault.storage.sqlite.store import SqliteReads

ALICE, BOB = Principal("alice"), Principal("bob")


def disk_bytes(db_path) -> bytes:
    return b"".join(p.read_bytes() for p in db_path.parent.glob(db_path.name + "*"))


def wrapped_keys(db_path) -> dict[str, bytes]:
    with sqlite3.connect(db_path) as db:
        return {row_id.hex(): key for row_id, key in db.execute("SELECT id, wrapped_key FROM rows")}


def test_no_deleted_row_keeps_its_wrapped_key_after_rebalancing(db_path, keyring_backend, clock):
    """900 rows, two gc waves, deletes and extensions in between: SQLite moves cells between pages; every
    copy of a removed row's wrapped key must be gone (secure_delete=ON for rows and summaries)."""
    rng = random.Random(7)
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault:
        ttl, turn = {}, {}
        for step in range(900):
            rep = vault.put(ALICE, f"t{step % 5}", step, "x", "z" * rng.randrange(10, 3000),
                            ttl_seconds=(10, 100, 3600)[step % 3])
            ttl[rep.id], turn[rep.id] = (10, 100, 3600)[step % 3], f"t{step % 5}"
        keys = wrapped_keys(db_path)
        deleted = [rid for rid in rng.sample(sorted(ttl), 60) if ttl[rid] == 3600]
        for rid in deleted:
            vault.delete(ALICE, rid)
        clock.advance(50)
        assert vault.gc() == 300
        extended = {rid for rid in ttl if ttl[rid] == 100 and turn[rid] == "t1"}
        assert vault.extend_turn(ALICE, "t1", 7200) == len([r for r in ttl if turn[r] == "t1" and ttl[r] != 10]) - len(
            [r for r in deleted if turn[r] == "t1"])
        clock.advance(100)
        assert vault.gc() == 300 - len(extended)
    gone = [rid for rid in ttl if ttl[rid] < 3600 and rid not in extended] + deleted
    data = disk_bytes(db_path)
    assert [rid for rid in gone if keys[rid] in data] == []
    survivors = [rid for rid in ttl if ttl[rid] == 3600 and rid not in deleted]
    assert all(keys[rid] in data for rid in survivors[:20])  # the scan can see keys that should be there


def test_delete_does_not_stall_behind_a_reader_and_finishes_the_checkpoint_later(db_path, keyring_backend):
    vault = Vault.open(db_path, keyring_backend=keyring_backend)
    rep = vault.put(ALICE, "t", 1, "x", "secret " * 100)
    key = wrapped_keys(db_path)[rep.id]
    reader = sqlite3.connect(db_path)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM rows").fetchone()  # holds a snapshot: a full checkpoint must wait
    started = time.monotonic()
    vault.delete(ALICE, rep.id)
    assert time.monotonic() - started < 5
    reader.rollback()
    reader.close()
    vault.close()  # the pending checkpoint runs here
    assert key not in disk_bytes(db_path)


def test_a_read_racing_a_delete_and_a_put_sees_one_consistent_row(vault, db_path, monkeypatch):
    """Another thread deletes alice's row and bob's put reuses its seq between two statements of alice's
    read: the read sees its snapshot (alice's content), never another row's chunks (a false tamper alarm)."""
    rep = vault.put(ALICE, "t", 1, "x", "alice data")
    original = SqliteReads.read_chunks

    def racing(reads, seq, first, last):
        def other_thread():
            vault.delete(ALICE, rep.id)
            vault.put(BOB, "t", 1, "x", "bob data")
        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join()
        return original(reads, seq, first, last)

    monkeypatch.setattr(SqliteReads, "read_chunks", racing)
    assert vault.read(ALICE, rep.id).content == "alice data"
    monkeypatch.setattr(SqliteReads, "read_chunks", original)
    assert vault.stats()["counters"]["integrity_failures"] == 0
    with pytest.raises(NotFound):
        vault.read(ALICE, rep.id)


def test_a_database_that_lost_its_vault_id_is_not_given_a_new_one(db_path, keyring_backend):
    with Vault.open(db_path, keyring_backend=keyring_backend) as vault:
        vault.put(ALICE, "t", 1, "x", "kept")
    secrets_before = dict(keyring_backend.secrets)
    with sqlite3.connect(db_path) as db:
        db.execute("DELETE FROM meta WHERE name = 'vault_id'")
    with pytest.raises(IntegrityError):
        Vault.open(db_path, keyring_backend=keyring_backend)
    assert keyring_backend.secrets == secrets_before  # no new index key or keyset was made


def test_a_database_file_swapped_after_open_is_not_followed_by_new_connections(db_path, keyring_backend, tmp_path):
    vault = Vault.open(db_path, keyring_backend=keyring_backend)
    vault.put(ALICE, "t", 1, "x", "original")
    other = tmp_path / "elsewhere.db"
    shutil.copy(db_path, other)
    os.replace(other, db_path)  # same name, another file
    outcome = []

    def new_thread():
        try:
            vault.list_for_turn(ALICE, "t")
            outcome.append("followed")
        except UnsafeStorage:
            outcome.append("refused")
    worker = threading.Thread(target=new_thread)
    worker.start()
    worker.join()
    vault.close()
    assert outcome == ["refused"]


def test_an_ancestor_others_may_write_without_sticky_bit_is_refused(tmp_path, keyring_backend):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    private = shared / "mine"
    private.mkdir(mode=0o700)
    with pytest.raises(UnsafeStorage):
        Vault.open(private / "v.db", keyring_backend=keyring_backend)
    shared.chmod(0o1777)  # sticky, like /tmp: others cannot rename our directory
    Vault.open(private / "v.db", keyring_backend=keyring_backend).close()
