"""The SQLite file's place on disk: db, -wal, -shm and the write lock files are 0600 and the directories the vault
creates 0700 under any umask; a path another account could write, swap or link is refused before anything is
created, and a file swapped after the vault opened it is not followed by new connections. A backup copy is private
from its first byte.
"""

from __future__ import annotations

import os
import shutil
import stat
import threading
from pathlib import Path

import pytest

from keys.testing import MemoryKeyring
from vault import Principal, UnsafeStorage, Vault
from vault.storage import backup

ALICE = Principal("alice")


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def permissive_umask():
    previous = os.umask(0)
    yield
    os.umask(previous)


def test_db_wal_and_shm_are_0600_and_new_directory_0700_under_umask_0(tmp_path, keyring_backend, alice,
                                                                      permissive_umask):
    db_path = tmp_path / "fresh" / "v.db"
    with Vault.open(db_path, keyring_backend=keyring_backend) as vault:
        vault.put(alice, "t", 1, "tool", "x" * 10_000)
        present = [p for p in (db_path, Path(f"{db_path}-wal"), Path(f"{db_path}-shm"), Path(f"{db_path}-ballast"))
                   if p.exists()]
        assert len(present) == 4
        assert {p.name: mode(p) for p in present} == {p.name: 0o600 for p in present}
    assert mode(db_path) == 0o600
    assert mode(db_path.parent) == 0o700


def test_write_lock_files_are_0600_under_umask_0(tmp_path, keyring_backend, alice, permissive_umask):
    db_path = tmp_path / "fresh" / "v.db"
    with Vault.open(db_path, keyring_backend=keyring_backend) as vault:
        vault.put(alice, "t", 1, "tool", "x")
    locks = [Path(f"{db_path}-lock"), Path(f"{db_path}-lock-next")]
    assert {p.name: mode(p) for p in locks} == {p.name: 0o600 for p in locks}


def test_every_directory_vault_open_creates_is_0700_under_umask_0(tmp_path, keyring_backend, permissive_umask):
    db_path = tmp_path / "a" / "b" / "c" / "v.db"
    Vault.open(db_path, keyring_backend=keyring_backend).close()
    created = [tmp_path / "a", tmp_path / "a" / "b", tmp_path / "a" / "b" / "c"]
    assert {str(d): oct(mode(d)) for d in created} == {str(d): "0o700" for d in created}


def make_db(path: Path, ring: MemoryKeyring) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with Vault.open(path, keyring_backend=ring) as vault:
        vault.put(Principal("alice"), "t", 1, "tool", "content")


def unsafe_dir(mode_bits: int):
    def arrange(db_path: Path, ring: MemoryKeyring) -> None:
        db_path.parent.chmod(mode_bits)
    return arrange


def unsafe_file(mode_bits: int, suffix: str = ""):
    def arrange(db_path: Path, ring: MemoryKeyring) -> None:
        make_db(db_path, ring)
        target = Path(f"{db_path}{suffix}")
        target.touch()
        target.chmod(mode_bits)
    return arrange


def symlinked(suffix: str):
    def arrange(db_path: Path, ring: MemoryKeyring) -> None:
        elsewhere = db_path.parent.parent / "elsewhere" / "real.db"
        make_db(elsewhere, ring)  # a valid database the link points to
        if suffix:
            make_db(db_path, ring)
        Path(f"{db_path}{suffix}").unlink(missing_ok=True)  # the -ballast stays after a vault closes
        os.symlink(elsewhere, f"{db_path}{suffix}")
    return arrange


def symlinked_lock(suffix: str):
    def arrange(db_path: Path, ring: MemoryKeyring) -> None:
        make_db(db_path, ring)  # its writes made the lock files: one is replaced by a link to another account's file
        Path(f"{db_path}{suffix}").unlink()
        os.symlink(db_path.parent.parent / "elsewhere", f"{db_path}{suffix}")
    return arrange


REFUSED = {"dir_0777": unsafe_dir(0o777), "dir_0775": unsafe_dir(0o775), "dir_0722": unsafe_dir(0o722),
           "db_0666": unsafe_file(0o666), "db_0620": unsafe_file(0o620), "wal_0666": unsafe_file(0o666, "-wal"),
           "shm_0602": unsafe_file(0o602, "-shm"), "db_symlink": symlinked(""), "wal_symlink": symlinked("-wal"),
           "shm_symlink": symlinked("-shm"), "lock_0666": unsafe_file(0o666, "-lock"),
           "lock_next_0622": unsafe_file(0o622, "-lock-next"), "lock_symlink": symlinked_lock("-lock"),
           "lock_next_symlink": symlinked_lock("-lock-next"), "ballast_0606": unsafe_file(0o606, "-ballast"),
           "ballast_symlink": symlinked("-ballast"), "lock_0644": unsafe_file(0o644, "-lock"),
           "lock_next_0640": unsafe_file(0o640, "-lock-next")}


def snapshot(root: Path) -> dict[str, tuple]:
    return {str(p.relative_to(root)): (p.is_symlink(), p.read_bytes() if p.is_file() else None)
            for p in root.rglob("*")}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_unsafe_storage_is_refused(tmp_path, keyring_backend, case):
    db_path = tmp_path / "vault" / "v.db"
    db_path.parent.mkdir(mode=0o700)
    REFUSED[case](db_path, keyring_backend)
    before = snapshot(tmp_path)
    with pytest.raises(UnsafeStorage):
        Vault.open(db_path, keyring_backend=keyring_backend)
    assert snapshot(tmp_path) == before, "a refused open created or changed files"


def test_world_readable_0755_directory_is_accepted(tmp_path, keyring_backend, alice):
    directory = tmp_path / "shared"
    directory.mkdir(mode=0o755)
    directory.chmod(0o755)
    with Vault.open(directory / "v.db", keyring_backend=keyring_backend) as vault:
        rep = vault.put(alice, "t", 1, "tool", "readable directory, private file")
        assert vault.get(alice, rep.id).content == "readable directory, private file"
    assert mode(directory / "v.db") == 0o600


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


def test_a_backup_file_is_private_from_its_first_byte_and_never_overwrites_or_follows_a_link(tmp_path, vault, db_path,
                                                                                            permissive_umask):
    vault.put(ALICE, "t", 1, "x", "hello")
    target = tmp_path / "copy.db"
    backup(db_path, target)
    assert mode(target) == 0o600
    with pytest.raises(UnsafeStorage):
        backup(db_path, target)
    (tmp_path / "link.db").symlink_to(tmp_path / "elsewhere.db")
    with pytest.raises(UnsafeStorage):
        backup(db_path, tmp_path / "link.db")
    assert not (tmp_path / "elsewhere.db").exists()
