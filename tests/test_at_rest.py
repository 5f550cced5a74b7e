"""What someone who reads the database files learns: no content, names or keys; 0600/0700; no leftovers.

The attacker reads db, -wal and -shm (while the vault runs, and after it closed) and may own the
directory's permissions if we let them; they never see the keyring.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import sqlite3
import stat
from contextlib import closing
from pathlib import Path

import pytest

from keys.testing import MemoryKeyring
from vault import NotFound, Principal, UnsafeStorage, Vault

SUFFIXES = ("", "-wal", "-shm", "-journal")


def canary(label: str) -> str:
    return f"CANARY{label}{secrets.token_hex(8)}"


def disk(db_path: Path) -> dict[str, bytes]:
    """Raw bytes of every file SQLite keeps for this database (and anything else in its directory)."""
    files = {p.name: p.read_bytes() for p in db_path.parent.iterdir() if p.is_file()}
    assert db_path.name in files
    return files


def leaks(files: dict[str, bytes], needles: dict[str, bytes]) -> list[tuple[str, str]]:
    return [(file, label) for file, data in files.items() for label, needle in needles.items() if needle in data]


def text_needles(values: dict[str, str]) -> dict[str, bytes]:
    needles = {}
    for label, value in values.items():
        needles[label + "/utf-8"] = value.encode()
        needles[label + "/utf-16-le"] = value.encode("utf-16-le")
    return needles


@pytest.fixture
def canaries() -> dict[str, str]:
    return {name: canary(name) for name in ("text", "binary", "jsonkey", "jsonvalue", "jsonmessage", "jsonitem",
                                            "user", "turn", "executor", "actor", "channel", "stream")}


@pytest.fixture
def stored(vault, canaries):
    """One row of every kind, named with canaries everywhere a caller can put a string."""
    who = Principal(canaries["user"], actor=canaries["actor"], channel=canaries["channel"])
    filler = "ordinary words of a web page " * 40
    text = canaries["text"] + filler + canaries["text"] + filler + canaries["text"]
    reps = [
        vault.put(who, canaries["turn"], 1, canaries["executor"], text),
        vault.put(who, canaries["turn"], 2, canaries["executor"], b"\x00\x01" + canaries["binary"].encode() * 3),
        vault.put(who, canaries["turn"], 3, canaries["executor"],
                  {canaries["jsonkey"]: canaries["jsonvalue"], "message": canaries["jsonmessage"],
                   "entries": [{"name": canaries["jsonitem"]}]}),
        vault.put(who, canaries["turn"], 4, canaries["executor"], canaries["stream"] * 5000),
    ]
    assert vault.get(who, reps[0].id).content == text
    assert canaries["text"] in reps[0].summary and reps[0].summary.count("\n") >= 2  # a head/tail summary
    return who, reps


def test_canaries_are_not_on_disk_while_open_before_checkpoint(vault, db_path, canaries, stored):
    files = disk(db_path)
    assert len(files.get(db_path.name + "-wal", b"")) > 100_000, "the rows should still be in the WAL"
    assert leaks(files, text_needles(canaries)) == []


def test_canaries_are_not_on_disk_after_close(vault, db_path, canaries, stored):
    vault.close()
    files = disk(db_path)
    assert len(files[db_path.name]) > 100_000
    assert leaks(files, text_needles(canaries)) == []


def test_summaries_are_not_on_disk(vault, db_path, stored):
    _, reps = stored
    beginnings = {f"summary {i}": rep.summary[:60] for i, rep in enumerate(reps)}
    beginnings["begins line"] = reps[0].summary.split("begins: ", 1)[1][:80]
    assert leaks(disk(db_path), text_needles(beginnings)) == []
    vault.close()
    assert leaks(disk(db_path), text_needles(beginnings)) == []


def keyring_needles(ring: MemoryKeyring) -> dict[str, bytes]:
    needles = {}
    for (service, user), secret in ring.secrets.items():
        document = json.loads(secret)
        encoded = [document["key"]] if "key" in document else list(document["keys"].values())
        for number, key in enumerate(encoded):
            needles[f"{service}/{user}/{number} base64"] = key.encode()
            needles[f"{service}/{user}/{number} raw"] = base64.b64decode(key)
        needles[f"{service}/{user} entry"] = secret.encode()
    return needles


def test_keyring_secrets_are_not_on_disk(vault, db_path, keyring_backend, stored, bob):
    vault.put(bob, "t", 1, "tool", "bob's row")
    needles = keyring_needles(keyring_backend)
    assert len(needles) >= 9  # index key, two owners
    assert leaks(disk(db_path), needles) == []
    vault.close()
    assert leaks(disk(db_path), needles) == []


# -- file modes --------------------------------------------------------------------------------------
@pytest.fixture
def permissive_umask():
    previous = os.umask(0)
    yield
    os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_db_wal_and_shm_are_0600_and_new_directory_0700_under_umask_0(tmp_path, keyring_backend, alice,
                                                                      permissive_umask):
    db_path = tmp_path / "fresh" / "v.db"
    with Vault.open(db_path, keyring_backend=keyring_backend) as vault:
        vault.put(alice, "t", 1, "tool", "x" * 10_000)
        present = [p for p in (db_path, Path(f"{db_path}-wal"), Path(f"{db_path}-shm")) if p.exists()]
        assert len(present) == 3
        assert {p.name: mode(p) for p in present} == {p.name: 0o600 for p in present}
    assert mode(db_path) == 0o600
    assert mode(db_path.parent) == 0o700


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
        os.symlink(elsewhere, f"{db_path}{suffix}")
    return arrange


REFUSED = {"dir_0777": unsafe_dir(0o777), "dir_0775": unsafe_dir(0o775), "dir_0722": unsafe_dir(0o722),
           "db_0666": unsafe_file(0o666), "db_0620": unsafe_file(0o620), "wal_0666": unsafe_file(0o666, "-wal"),
           "shm_0602": unsafe_file(0o602, "-shm"), "db_symlink": symlinked(""), "wal_symlink": symlinked("-wal"),
           "shm_symlink": symlinked("-shm")}


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


# -- deletion leaves no unwrappable key behind ---------------------------------------------------------
def sealed_parts(db_path: Path, row_id: str) -> dict[str, bytes]:
    with closing(sqlite3.connect(db_path)) as conn:
        seq, wrapped, metadata = conn.execute("SELECT seq, wrapped_key, metadata FROM rows WHERE id = ?",
                                              (bytes.fromhex(row_id),)).fetchone()
        summary = conn.execute("SELECT sealed FROM summaries WHERE seq = ?", (seq,)).fetchone()[0]
        chunk = conn.execute("SELECT sealed FROM chunks WHERE pos = ?", (seq << 20,)).fetchone()[0]
    return {"wrapped_key": wrapped, "metadata": metadata, "summary": summary, "first_chunk": chunk}


def windows(data: bytes, size: int = 16) -> dict[str, bytes]:
    return {f"window {i}": data[i:i + size] for i in range(len(data) - size + 1)}


@pytest.mark.parametrize("how", ["delete", "gc"])
@pytest.mark.parametrize("long_names", [False, True], ids=["short_names", "overflowing_row"])
def test_deleted_row_leaves_no_wrapped_key_on_disk(vault, db_path, clock, how, long_names):
    name = "n" * 1024 if long_names else "alice"
    who = Principal(name, actor=name, channel=name)
    turn = executor = "t" * 1024 if long_names else "t"
    keep_before = vault.put(who, turn, 0, executor, "keep me " * 100, ttl_seconds=7200)
    doomed = vault.put(who, turn, 1, executor, "secret page " * 12_500, ttl_seconds=60)
    keep_after = vault.put(who, turn, 2, executor, "keep me too " * 100, ttl_seconds=7200)
    parts = sealed_parts(db_path, doomed.id)
    assert len(parts["wrapped_key"]) == 60 and (len(parts["metadata"]) > 4096) == long_names
    if how == "delete":
        vault.delete(who, doomed.id)
    else:
        clock.advance(60)
        assert vault.gc() == 1
    with pytest.raises(NotFound):
        vault.get(who, doomed.id)
    assert vault.get(who, keep_before.id).content == "keep me " * 100
    assert vault.get(who, keep_after.id).content == "keep me too " * 100
    assert leaks(disk(db_path), windows(parts["wrapped_key"])) == [], "wrapped key still on disk (vault open)"
    vault.close()
    assert leaks(disk(db_path), windows(parts["wrapped_key"])) == [], "wrapped key still on disk (closed)"
