"""What someone who reads the database files learns: no content, names or keys, and nothing of a row once it is
deleted, collected or its owner shredded, even after the b-tree moved cells around or a reader held the WAL.

The attacker reads db, -wal and -shm (while the vault runs, and after it closed); they never see the keyring.
The files' modes and paths are tests/storage/sqlite/test_private_files.py.
"""

from __future__ import annotations

import base64
import json
import random
import secrets
import time
from pathlib import Path

import pytest

from keys.testing import MemoryKeyring
from vault import NotFound, Principal, Vault

pytestmark = pytest.mark.sqlite_only("the SQLite file's bytes on disk; PostgreSQL's files: tests/attacks/"
                                     "test_write_path_canaries.py and tests/system/test_postgres_remanence.py")
ALICE = Principal("alice")
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
        if not isinstance(document, dict):  # an expiry epoch's destroyed-through marker: a number, not a secret
            continue
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


# -- deletion leaves no unwrappable key behind ---------------------------------------------------------


def windows(data: bytes, size: int = 16) -> dict[str, bytes]:
    return {f"window {i}": data[i:i + size] for i in range(len(data) - size + 1)}


@pytest.mark.parametrize("how", ["delete", "gc"])
@pytest.mark.parametrize("long_names", [False, True], ids=["short_names", "overflowing_row"])
def test_deleted_row_leaves_no_wrapped_key_on_disk(vault, db_path, attacker, clock, how, long_names):
    name = "n" * 1024 if long_names else "alice"
    who = Principal(name, actor=name, channel=name)
    turn = executor = "t" * 1024 if long_names else "t"
    keep_before = vault.put(who, turn, 0, executor, "keep me " * 100, ttl_seconds=7200)
    doomed = vault.put(who, turn, 1, executor, "secret page " * 12_500, ttl_seconds=60)
    keep_after = vault.put(who, turn, 2, executor, "keep me too " * 100, ttl_seconds=7200)
    parts = attacker.row_parts(doomed.id)
    assert len(parts["wrapped_key"]) == 65 and (len(parts["metadata"]) > 4096) == long_names
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


def wrapped_keys(attacker) -> dict[str, bytes]:
    """Every stored row's wrapped key, by row id."""
    return {row["id"].hex(): row["wrapped_key"] for row in attacker.rows().values()}


def all_bytes(db_path: Path) -> bytes:
    return b"".join(disk(db_path).values())


def test_no_deleted_row_keeps_its_wrapped_key_after_rebalancing(db_path, attacker, keyring_backend, clock):
    """900 rows, two gc waves, deletes and extensions in between: SQLite moves cells between pages; every
    copy of a removed row's wrapped key must be gone (secure_delete=ON for rows and summaries)."""
    rng = random.Random(7)
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault:
        ttl, turn = {}, {}
        for step in range(900):
            rep = vault.put(ALICE, f"t{step % 5}", step, "x", "z" * rng.randrange(10, 3000),
                            ttl_seconds=(10, 100, 3600)[step % 3])
            ttl[rep.id], turn[rep.id] = (10, 100, 3600)[step % 3], f"t{step % 5}"
        keys = wrapped_keys(attacker)
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
    data = all_bytes(db_path)
    assert [rid for rid in gone if keys[rid] in data] == []
    survivors = [rid for rid in ttl if ttl[rid] == 3600 and rid not in deleted and turn[rid] != "t1"]
    assert all(keys[rid] in data for rid in survivors[:20])  # the scan can see keys that should be there (t1's
    # rows were extended: their keys were wrapped again, under the epoch of their new expiry)


def test_delete_does_not_stall_behind_a_reader_and_finishes_the_checkpoint_later(db_path, attacker, keyring_backend):
    vault = Vault.open(db_path, keyring_backend=keyring_backend)
    rep = vault.put(ALICE, "t", 1, "x", "secret " * 100)
    key = wrapped_keys(attacker)[rep.id]
    with attacker.reading():  # another reader holds a snapshot: a full checkpoint must wait
        started = time.monotonic()
        vault.delete(ALICE, rep.id)
        assert time.monotonic() - started < 5
    vault.close()  # the pending checkpoint runs here
    assert key not in all_bytes(db_path)


# names long enough to overflow SQLite's pages take several times as long: slow, out of the quick tier
@pytest.mark.parametrize("long_names", [False, pytest.param(True, marks=pytest.mark.slow)],
                         ids=["short_names", "overflowing_rows"])
def test_shredded_owner_leaves_no_wrapped_key_metadata_or_summary_on_disk(vault, db_path, attacker, bob, long_names):
    name = "n" * 1024 if long_names else "alice"
    who = Principal(name, actor=name, channel=name)
    turn = "t" * 1024 if long_names else "t"
    keep_before = vault.put(bob, "t", 0, "tool", "bob before " * 100)
    doomed = [vault.put(who, turn, step, turn, f"secret page {step} " * 3000) for step in range(3)]
    keep_after = vault.put(bob, "t", 9, "tool", "bob after " * 100)
    needles = {}
    for rep in doomed:
        for part, sealed in attacker.row_parts(rep.id).items():
            if part != "first_chunk":  # chunks are not zeroed by design: their key went with the row
                needles |= {f"{rep.id} {part} {k}": v for k, v in windows(sealed, 24).items()}
    assert vault.shred_owner(name) == 3
    for rep in doomed:
        with pytest.raises(NotFound):
            vault.get(who, rep.id)
    assert vault.get(bob, keep_before.id).content == "bob before " * 100
    assert vault.get(bob, keep_after.id).content == "bob after " * 100
    assert leaks(disk(db_path), needles) == [], "a shredded row's sealed parts are still on disk (vault open)"
    vault.close()
    assert leaks(disk(db_path), needles) == [], "a shredded row's sealed parts are still on disk (closed)"
