"""Upgrades: files made before schema 3 (every layout since the first) used for everything by this code; the
previous release (5869981, schema 2) still running while this one raises the schema; the previous release
meeting a file made at schema 3. threat_model.md, "Row ids"; README, "Upgrading". An altered id in such a file is
tests/attacks/test_row_ids.py. A file of the last release before deletion ledgers (8c9bad0, schema 3) used by this
one, which records deletes from then on (threat_model.md, "Rollback")."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.storage.sqlite.layouts import first_layout, legacy_file, user_version
from tests.support.file_keyring import FileKeyring, load
from tests.support.repository import ROOT
from vault import NotFound, Principal, Vault

PREVIOUS = "5869981"  # the last commit before row ids named their seq: SCHEMA_VERSION 2, random ids, id index
BEFORE_LEDGERS = "8c9bad0"  # the last commit before deletion ledgers: SCHEMA_VERSION 3
ALICE, BOB = Principal("alice"), Principal("bob")


# the previous release, driven one JSON command per line (it keeps the vault open between commands)
CHILD = r"""
import json, sys
from vault import Principal, Vault, VaultError
try:
    from vault.store import SCHEMA_VERSION  # the previous release's layout
except ImportError:
    from vault.storage.sqlite.schema import SCHEMA_VERSION  # where 8c9bad0 keeps it
from tests.support.file_keyring import FileKeyring, load
try:
    vault = Vault.open(sys.argv[1], keyring_backend=FileKeyring())
    print(json.dumps(SCHEMA_VERSION), flush=True)
except VaultError as error:
    print(json.dumps({"error": type(error).__name__, "message": str(error)}), flush=True)
    sys.exit(0)
for line in sys.stdin:
    op, *args = json.loads(line)
    try:
        if op == "put":
            out = vault.put(Principal(args[0]), "t", args[1], "x", args[2]).id
        elif op == "get":
            out = vault.get(Principal(args[0]), args[1]).content
        elif op == "delete":
            out = vault.delete(Principal(args[0]), args[1])
        elif op == "list":
            out = sorted(r.id for r in vault.list_for_turn(Principal(args[0]), "t"))
        elif op == "extend":
            out = vault.extend_turn(Principal(args[0]), "t", args[1])
        elif op == "rewrap":
            out = vault.rewrap(args[0])
        elif op == "gc":
            out = vault.gc(args[0])
    except VaultError as error:
        out = {"error": type(error).__name__}
    print(json.dumps(out), flush=True)
"""


class Previous:
    """A process running the previous release on one database, with the test keyring file."""

    def __init__(self, tree: Path, db: Path, ring: Path) -> None:
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "SCRATCHVAULT_TEST_KEYRING": str(ring)}
        # cwd first on sys.path (python -c): the previous release's vault/ and keys/, never this tree's; the
        # repository root after it, for tests.support.file_keyring only
        self.process = subprocess.Popen([sys.executable, "-c", CHILD, str(db)], cwd=tree, env=env, text=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.opened = self._answer()

    def _answer(self):
        line = self.process.stdout.readline()
        assert line, "the previous release's process died"
        return json.loads(line)

    def __call__(self, *command):
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        return self._answer()

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=30)


def release_tree(tmp_path_factory, commit: str) -> Path:
    """The vault and keys packages of ``commit``, extracted to a directory of their own."""
    if shutil.which("git") is None:
        pytest.skip("git is needed to get the previous release")
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit, "vault", "keys"], capture_output=True,
                             check=False)
    if archive.returncode:
        pytest.skip(f"commit {commit} is not in this clone")
    tree = tmp_path_factory.mktemp("release")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:  # our own git archive; the filter where known
        tar.extractall(tree, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    return tree


@pytest.fixture(scope="module")
def previous_tree(tmp_path_factory) -> Path:
    return release_tree(tmp_path_factory, PREVIOUS)


@pytest.fixture(scope="module")
def before_ledgers_tree(tmp_path_factory) -> Path:
    return release_tree(tmp_path_factory, BEFORE_LEDGERS)


@pytest.fixture
def ring(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "ring.json"
    monkeypatch.setenv("SCRATCHVAULT_TEST_KEYRING", str(path))
    return path


# -- the previous release and this one on one file ------------------------------------------------------------------
def test_the_previous_release_still_running_when_the_schema_is_raised_shares_every_row(previous_tree, ring, db_path,
                                                                                      attacker):
    old = Previous(previous_tree, db_path, ring)  # it makes the file: schema 2, unique index on ids
    try:
        assert old.opened == 2
        a1 = old("put", "alice", 1, "old one")
        with Vault.open(db_path, keyring_backend=FileKeyring()) as new:
            assert user_version(db_path) == 4 and new._store._ids_indexed is True
            n2 = new.put(ALICE, "t", 2, "x", "new two").id
            assert new.get(ALICE, a1).content == "old one" and old("get", "alice", n2) == "new two"
            a3 = old("put", "alice", 3, "old three")  # a random id, written after the raise
            assert new.get(ALICE, a3).content == "old three"
            assert old("list", "alice") == sorted(r.id for r in new.list_for_turn(ALICE, "t")) == sorted([a1, n2, a3])
            # a seq reused across releases: the old one deletes the top row, the new one takes its seq
            assert old("delete", "alice", a3) is None
            n4 = new.put(ALICE, "t", 4, "x", "new four").id
            assert attacker.seq_of(n4) == 3
            with pytest.raises(NotFound):
                new.get(ALICE, a3)
            assert old("get", "alice", a3) == {"error": "NotFound"} and old("get", "bob", n4) == {"error": "NotFound"}
            assert old("get", "alice", n4) == "new four"
            # rotation here, rewrap and extend there, retirement here: every row still reads on both sides
            new.rotate_owner_key("alice")
            assert old("rewrap", "alice") == 3 and old("extend", "alice", 7200) == 3
            assert new.retire_old_key_versions("alice") == 1
            assert [new.get(ALICE, i).content for i in (a1, n2, n4)] == ["old one", "new two", "new four"]
            assert [old("get", "alice", i) for i in (a1, n2, n4)] == ["old one", "new two", "new four"]
            new.delete(ALICE, n2)
            assert old("get", "alice", n2) == {"error": "NotFound"}
            assert old("gc", 4e9) == 2 and attacker.counts() == (0, 0, 0)
            assert new.list_for_turn(ALICE, "t") == []
    finally:
        old.close()


def test_the_previous_release_refuses_a_file_made_at_schema_3_and_leaves_it_as_it_is(previous_tree, ring, db_path,
                                                                                     attacker):
    with Vault.open(db_path, keyring_backend=FileKeyring()) as new:
        row = new.put(ALICE, "t", 1, "x", "kept").id
    before = attacker.counts()
    old = Previous(previous_tree, db_path, ring)
    old.close()
    assert old.opened["error"] == "StorageError" and "newer scratchvault" in old.opened["message"]
    assert user_version(db_path) == 4 and attacker.counts() == before
    with Vault.open(db_path, keyring_backend=FileKeyring()) as new:
        assert new.get(ALICE, row).content == "kept"


# -- files made before schema 3, used for everything by this release --------------------------------------------------


@pytest.mark.parametrize("layout", ["v1_autoincrement", "v1", "v2"])
def test_a_file_made_before_schema_3_serves_every_operation_by_its_id_index(db_path, attacker, keyring_backend, clock,
                                                                            layout):
    {"v1_autoincrement": first_layout, "v1": lambda p: legacy_file(p, 1), "v2": legacy_file}[layout](db_path)
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault:
        assert vault._store._ids_indexed is True
        ids = [vault.put(ALICE, "t", step, "x", f"row {step}", ttl_seconds=60).id for step in range(3)]
        top = vault.put(BOB, "t", 1, "x", "bob's top").id
        vault.delete(BOB, top)
        reuse = vault.put(ALICE, "t", 3, "x", "reuses bob's seq", ttl_seconds=60).id
        assert attacker.seq_of(reuse) == attacker.seq_of(ids[-1]) + 1
        for who in (ALICE, BOB):
            with pytest.raises(NotFound):
                vault.get(who, top)
        assert vault.extend_turn(ALICE, "t", 3600) == 4
        vault.rotate_owner_key("alice")
        assert vault.rewrap("alice") == 4 and vault.retire_old_key_versions("alice") == 1
        vault.delete(ALICE, ids[0])
        clock.advance(120)
        assert vault.gc() == 0  # extended past the clock
        assert sorted(r.id for r in vault.list_for_turn(ALICE, "t")) == sorted([*ids[1:], reuse])
        assert [vault.get(ALICE, i).content for i in ids[1:]] == ["row 1", "row 2"]
        assert vault.shred_owner("alice") == 3 and attacker.counts() == (0, 0, 0)
        after = vault.put(BOB, "t", 2, "x", "after the file emptied").id
        assert attacker.seq_of(after) == 1  # seqs restart: every earlier id of seq 1 must miss
        with pytest.raises(NotFound):
            vault.get(BOB, top)
        assert vault.get(BOB, after).content == "after the file emptied"


# -- the last release before deletion ledgers ---------------------------------------------------------------------
def test_a_file_made_before_ledgers_is_used_and_records_deletes_from_then_on(before_ledgers_tree, ring, db_path,
                                                                            attacker):
    """A file of 8c9bad0 (schema 3, no deletions table, no counts in the keyring) opens as an owner who deleted
    nothing: everything works, a delete starts the owner's ledger and count, and a copy of a row deleted from then
    on is NotFound and collected. 8c9bad0 then refuses the file (it checks for tables it did not make before the
    version; this release checks the version first) and leaves it as it is."""
    old = Previous(before_ledgers_tree, db_path, ring)
    try:
        assert old.opened == 3
        a1, a2, a3 = (old("put", "alice", step, f"row {step}") for step in (1, 2, 3))
        assert old("delete", "alice", a1) is None  # a delete no ledger records
    finally:
        old.close()
    saved = attacker.save_row(attacker.seq_of(a2))
    with Vault.open(db_path, keyring_backend=FileKeyring()) as new:
        assert user_version(db_path) == 4 and attacker.ledgers() == {}
        assert sorted(r.id for r in new.list_for_turn(ALICE, "t")) == sorted([a2, a3])
        assert new.extend_turn(ALICE, "t", 7200) == 2 and new.get(ALICE, a3).content == "row 3"
        new.delete(ALICE, a2)
        assert len(attacker.ledgers()) == 1
        assert [v for k, v in load(ring).items() if k.split("\0")[0].endswith("/deletions")] == ["1"]
        attacker.restore_row(saved)
        with pytest.raises(NotFound):
            new.get(ALICE, a2)
        assert new.gc() == 1 and sorted(attacker.row_ids()) == [a3]
    before = attacker.counts()
    refused = Previous(before_ledgers_tree, db_path, ring)
    refused.close()
    assert refused.opened["error"] == "IntegrityError" and "did not make" in refused.opened["message"]
    assert user_version(db_path) == 4 and attacker.counts() == before
