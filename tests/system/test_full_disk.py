"""A file system that really fills up: a 16 MiB tmpfs mounted by each test (as root; CI runs
as root), the vault's file on it, the rest filled with puts and with a plain file until the kernel answers ENOSPC.
Puts stop at the disk reserve with nothing stored, delete, gc and shred still run on a completely full file
system (the ballast), the same Vault object works again once space is freed, per-owner quotas refuse one owner
while another still puts, and the file passes SQLite's integrity check after all of it. README, "Disk space and
quotas"; threat_model.md, "Full disk"."""

from __future__ import annotations

import errno
import io
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from keys.testing import MemoryKeyring
from tests.support.clock import FakeClock
from vault import NotFound, Principal, QuotaExceeded, StorageError, Vault
from vault.ops.doctor import diagnose

MIB = 1 << 20
SIZE = 16 * MIB
RESERVE = 4 * MIB  # its ballast: 1 MiB
ALICE, BOB = Principal("alice"), Principal("bob")


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A private 16 MiB tmpfs for this test, always unmounted after it (also when the test fails)."""
    yield from _tmpfs(tmp_path, SIZE)


def _tmpfs(tmp_path: Path, size: int) -> Iterator[Path]:
    """A directory on a private tmpfs of ``size`` bytes, unmounted when the generator ends."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root (CI runs as root)")
    if shutil.which("mount") is None or shutil.which("umount") is None:
        pytest.skip("no mount(8) and umount(8) here")
    mount_point = tmp_path / "fs"
    mount_point.mkdir(mode=0o700)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(mount_point)],
                             capture_output=True, text=True, check=False)
    if mounted.returncode:
        pytest.skip(f"cannot mount a tmpfs here (a container without CAP_SYS_ADMIN?): {mounted.stderr.strip()}")
    try:
        directory = mount_point / "vault"
        directory.mkdir(mode=0o700)
        yield directory
    finally:
        if subprocess.run(["umount", str(mount_point)], capture_output=True, check=False).returncode:
            subprocess.run(["umount", "-l", str(mount_point)], capture_output=True, check=False)


def free_bytes(path: Path) -> int:
    info = os.statvfs(path)
    return info.f_bavail * info.f_frsize


def fill(directory: Path, name: str = "filler") -> Path:
    """A plain file that takes every free byte: written until the kernel says ENOSPC."""
    path = directory / name
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for block in (1 << 16, 1 << 12):
            try:
                while True:
                    os.write(descriptor, bytes(block))
            except OSError as error:
                assert error.errno == errno.ENOSPC
    finally:
        os.close(descriptor)
    assert free_bytes(directory) == 0
    return path


def counts(db: Path) -> tuple[int, int, int]:
    """Rows, summaries and chunks in the file, in rows and in their own tables (read-only: the file system may be
    full)."""
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as connection:
        return connection.execute("SELECT count(*), count(summary) + (SELECT count(*) FROM summaries), "
                                  "count(chunk) + (SELECT count(*) FROM chunks) FROM rows").fetchone()


def intact(db: Path) -> bool:
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as connection:
        return connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


def open_vault(db: Path, ring: MemoryKeyring, clock: FakeClock | None = None, **settings) -> Vault:
    return Vault.open(db, keyring_backend=ring, clock=clock or FakeClock(), **settings)


def test_puts_stop_at_the_reserve_with_nothing_stored_a_stream_midway_and_resume_when_space_is_freed(small_fs):
    db = small_fs / "v.db"
    with open_vault(db, MemoryKeyring(), disk_reserve_bytes=RESERVE) as vault:
        stream = io.BytesIO(os.urandom(8 * MIB))  # would need 16 MiB more (log and file): refused as it goes
        with pytest.raises(QuotaExceeded, match="disk reserve"):
            vault.put(ALICE, "t", 0, "x", stream)
        assert 0 < stream.tell() < 8 * MIB and counts(db) == (0, 0, 0)
        stored = {}
        with pytest.raises(QuotaExceeded, match="disk reserve") as refused:
            for step in range(64):
                content = os.urandom(512 * 1024)
                stored[vault.put(ALICE, "t", step, "x", content).id] = content
        assert "alice" not in str(refused.value)
        assert 10 <= len(stored) < 64 and counts(db)[0] == len(stored)
        disk = vault.stats()["disk"]
        assert disk["reserve_bytes"] == RESERVE and disk["ballast_bytes"] == MIB
        assert disk["free_bytes"] + disk["ballast_bytes"] >= RESERVE  # the reserve held
        bobs = os.urandom(512 * 1024)
        with pytest.raises(QuotaExceeded):
            vault.put(BOB, "t", 1, "x", bobs)  # the reserve is everyone's
        assert counts(db)[0] == len(stored)
        for victim in list(stored)[:2]:
            vault.delete(ALICE, victim)
            del stored[victim]
        # the file keeps the pages the deletes freed (the file system never sees them): a put reuses them
        assert vault.get(BOB, vault.put(BOB, "t", 1, "x", bobs).id).content == bobs
        assert all(vault.get(ALICE, row).content == content for row, content in stored.items())
    assert intact(db)


def test_delete_gc_and_shred_run_on_a_completely_full_file_system_and_the_same_vault_recovers(small_fs, caplog):
    db, ring, clock = small_fs / "v.db", MemoryKeyring(), FakeClock()
    with open_vault(db, ring, clock, disk_reserve_bytes=RESERVE) as vault:
        big = [vault.put(ALICE, "t", step, "x", os.urandom(256 * 1024)).id for step in range(9)]
        for step in range(300):
            vault.put(ALICE, "short", step, "x", f"expires soon {step} " * 20, ttl_seconds=10)
        bobs = [vault.put(BOB, "t", step, "x", os.urandom(100_000)).id for step in range(4)]
        vault.delete(ALICE, big.pop())  # its checkpoint truncates the WAL: no room left in it either
        assert vault.stats()["disk"]["ballast_bytes"] == MIB and os.path.getsize(f"{db}-wal") == 0
        filler = fill(small_fs)
        with pytest.raises(QuotaExceeded):
            vault.put(ALICE, "t", 99, "x", "no room")
        for step, (operation, done) in enumerate([(lambda: vault.delete(ALICE, big[0]), None),
                                                  (lambda: (clock.advance(60), vault.gc())[1], 300),
                                                  (lambda: vault.shred_owner("bob"), 4)]):
            if step:
                fill(small_fs, f"filler {step}")  # whatever the last one gave back is taken too
            caplog.clear()
            assert operation() == done
            assert "released the ballast so deletes can run" in caplog.text  # met ENOSPC, ran all the same
            assert vault.stats()["disk"]["ballast_bytes"] == MIB  # held again: the space came back
        for gone, owner in ((big[0], ALICE), (bobs[0], BOB)):
            with pytest.raises(NotFound):
                vault.get(owner, gone)
        assert counts(db) == (7, 7, 7 * 4)
        with pytest.raises(QuotaExceeded):
            vault.put(ALICE, "t", 99, "x", "still no room")
        for path in small_fs.glob("filler*"):
            path.unlink()
        assert filler not in small_fs.iterdir()
        again = vault.put(ALICE, "t", 100, "x", "the same Vault object, no restart")
        assert vault.get(ALICE, again.id).content == "the same Vault object, no restart"
        assert [len(vault.get(ALICE, row).content) for row in big[1:]] == [256 * 1024] * 7
    assert intact(db)


def test_the_first_put_on_a_full_file_system_fails_cleanly_with_the_reserve_and_without(small_fs):
    ring = MemoryKeyring()
    with open_vault(small_fs / "reserved.db", ring, disk_reserve_bytes=RESERVE) as vault, \
            open_vault(small_fs / "unreserved.db", ring, disk_reserve_bytes=0) as bare:
        filler = fill(small_fs)
        with pytest.raises(QuotaExceeded, match="disk reserve"):
            vault.put(ALICE, "t", 1, "x", "first ever")
        with pytest.raises(StorageError, match="file system is full") as full:
            bare.put(ALICE, "t", 1, "x", "first ever")
        assert not isinstance(full.value, QuotaExceeded)
        assert counts(small_fs / "reserved.db") == counts(small_fs / "unreserved.db") == (0, 0, 0)
        assert vault.stats()["rows"] == bare.stats()["rows"] == 0
        filler.unlink()
        for opened in (vault, bare):
            row = opened.put(ALICE, "t", 1, "x", "first, once there is room")
            assert opened.get(ALICE, row.id).content == "first, once there is room"
    assert intact(small_fs / "reserved.db") and intact(small_fs / "unreserved.db")


def test_opening_a_new_vault_on_a_full_file_system_fails_cleanly_and_works_once_there_is_room(small_fs):
    filler = fill(small_fs)
    with pytest.raises(StorageError):
        open_vault(small_fs / "new.db", MemoryKeyring())
    filler.unlink()
    with open_vault(small_fs / "new.db", MemoryKeyring(), disk_reserve_bytes=RESERVE) as vault:
        assert vault.get(ALICE, vault.put(ALICE, "t", 1, "x", "made").id).content == "made"


def test_quotas_refuse_one_owner_while_another_still_puts_on_a_small_file_system(small_fs):
    db = small_fs / "v.db"
    with open_vault(db, MemoryKeyring(), disk_reserve_bytes=RESERVE, owner_max_bytes=2 * MIB,
                    owner_max_rows=50) as vault:
        for step in range(4):
            vault.put(ALICE, "t", step, "x", os.urandom(512 * 1024))
        before = counts(db)
        with pytest.raises(QuotaExceeded, match="quota of 2,097,152 stored bytes"):
            vault.put(ALICE, "t", 4, "x", b"one byte past")
        assert counts(db) == before
        for step in range(50):
            vault.put(BOB, "t", step, "x", f"bob {step}")
        with pytest.raises(QuotaExceeded, match="quota of 50 stored rows"):
            vault.put(BOB, "t", 50, "x", "the 51st")
        assert counts(db)[0] == 54
        assert vault.stats()["quotas"] == {"owner_max_rows": 50, "owner_max_bytes": 2 * MIB}
    assert intact(db)


def test_doctor_warns_when_free_space_is_below_the_default_reserve(small_fs):
    with open_vault(small_fs / "v.db", MemoryKeyring(), disk_reserve_bytes=RESERVE) as vault:
        vault.put(ALICE, "t", 1, "x", "hello")
    lines, _ = diagnose(small_fs / "v.db")
    disk = [line for line in lines if "disk:" in line]
    assert len(disk) == 1 and disk[0].startswith("WARN  disk: ") and "below the reserve" in disk[0]
    assert "default reserve 64.0 MiB" in disk[0] and "ballast 1.0 MiB" in disk[0]


def grow_ledger(vault: Vault, user_id: str, entries: int) -> int:
    """Make the owner's ledger of deleted rows as large as ``entries`` deletes within max_ttl_seconds leave it,
    sealed as a delete seals it (tens of thousands of real deletes would take minutes); returns its bytes."""
    deletions, index = vault._deletions, vault._keys.index_key()
    owner_tag = index.owner_tag(user_id)
    with vault._store.transaction() as tx:
        ledger = deletions.checked(tx, index, owner_tag, deletions.floor(owner_tag))
        grown = type(ledger)(ledger.counter, {**ledger.entries, **{os.urandom(16): 4e9 for _ in range(entries)}})
        tx.put_ledger(owner_tag, deletions._ledgers.seal(index, owner_tag, grown))
    return len(grown.body())


def test_a_delete_that_rewrites_a_large_ledger_runs_on_a_completely_full_file_system(small_fs, caplog):
    """Each delete rewrites its owner's whole ledger, and one larger than the ballast would fail on a full disk, so
    the ballast grows with the largest ledger (up to half the reserve)."""
    db = small_fs / "v.db"
    with open_vault(db, MemoryKeyring(), disk_reserve_bytes=RESERVE) as vault:
        rows = [vault.put(ALICE, "t", step, "x", os.urandom(100_000)).id for step in range(3)]
        vault.delete(ALICE, rows.pop())
        assert grow_ledger(vault, "alice", 60_000) > MIB  # more than the smallest ballast
        vault.put(ALICE, "t", 9, "x", "a put refills the ballast to the ledger's size")
        assert vault.stats()["disk"]["ballast_bytes"] > MIB
        fill(small_fs)
        caplog.clear()
        vault.delete(ALICE, rows[0])
        assert "released the ballast so deletes can run" in caplog.text
        with pytest.raises(NotFound):
            vault.get(ALICE, rows[0])
    assert intact(db)


@pytest.fixture
def roomy_fs(tmp_path: Path) -> Iterator[Path]:
    """A private 600 MiB tmpfs: room for large rows before it is filled up."""
    yield from _tmpfs(tmp_path, 600 * MIB)


def test_gc_and_delete_remove_large_rows_on_a_completely_full_file_system(roomy_fs):
    db, ring, clock = roomy_fs / "v.db", MemoryKeyring(), FakeClock()
    with open_vault(db, ring, clock, disk_reserve_bytes=16 * MIB) as vault:
        large = vault.put(ALICE, "t", 0, "x", os.urandom(100 * MIB)).id
        for step in range(50):  # ordinary outputs within every quota: together more WAL than the ballast holds
            vault.put(BOB, "t", step, "x", os.urandom(5 * MIB), ttl_seconds=10)
        assert vault.stats()["disk"]["ballast_bytes"] > MIB  # grown to what deleting the large row alone writes
        vault.delete(ALICE, vault.put(ALICE, "t", 1, "x", "checkpoints the WAL").id)
        fill(roomy_fs)
        clock.advance(60)
        assert vault.gc() == 50
        fill(roomy_fs, "filler 2")
        vault.delete(ALICE, large)
        with pytest.raises(NotFound):
            vault.get(ALICE, large)
        assert counts(db) == (0, 0, 0)
    assert intact(db)
