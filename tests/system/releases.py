"""Earlier releases of scratchvault, run next to this one: their vault/ and keys/ from this clone's history, in a
child process driven one JSON command per line (tests/system/test_upgrades.py)."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.support.repository import ROOT

# the previous release, driven one JSON command per line (it keeps the vault open between commands)
CHILD = r"""
import base64, json, sys
from vault import Principal, Vault, VaultError
try:
    from vault.storage.sqlite.schema import SCHEMA_VERSION  # releases with the storage package
except ImportError:
    from vault.store import SCHEMA_VERSION  # releases before it
from tests.support.file_keyring import FileKeyring, load, save
from tests.support.keyring_entries import owner_username
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
        elif op == "put_for":  # user, step, content (text or JSON), ttl
            out = vault.put(Principal(args[0]), "t", args[1], "x", args[2], args[3]).id
        elif op == "put_bytes":  # user, step, content in base64, ttl
            out = vault.put(Principal(args[0]), "t", args[1], "x", base64.b64decode(args[2]), args[3]).id
        elif op == "get":
            out = vault.get(Principal(args[0]), args[1]).content
        elif op == "delete":
            out = vault.delete(Principal(args[0]), args[1])
        elif op == "list":
            out = sorted(r.id for r in vault.list_for_turn(Principal(args[0]), "t"))
        elif op == "extend":
            out = vault.extend_turn(Principal(args[0]), "t", args[1])
        elif op == "rotate":
            out = vault.rotate_owner_key(args[0])
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


def refuses_as_newer(tree: Path, db: Path | str, ring: Path) -> None:
    """The release of `tree` opens the database, meets a schema it does not know, and refuses it as a newer one's."""
    old = Previous(tree, db, ring)
    old.close()
    assert old.opened["error"] == "StorageError" and "newer scratchvault" in old.opened["message"]


def release_tree(tmp_path_factory, commit: str) -> Path:
    """The vault/ and keys/ of an earlier commit, extracted from this clone's history."""
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
