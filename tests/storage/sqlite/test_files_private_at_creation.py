"""Every file and directory the vault makes is private from its first byte, not narrowed after: under umask 0 a
workload that makes each of them (tests/support/file_creation_workload.py) runs under strace, and every
``open`` with O_CREAT and every ``mkdir`` under its directory must ask for no group or other bits; SQLite's
temporary files are pointed there too. A file created 0644 and chmod-ed to 0600 afterwards fails here."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.repository import ROOT, child_env

CREATING = re.compile(r'(?:open|openat|creat)\((?:AT_FDCWD, |\d+, )?"([^"]+)", ([A-Z_|]+), (0\d+)(?:\)| <unfinished)')
MKDIR = re.compile(r'mkdir(?:at)?\((?:AT_FDCWD, |\d+, )?"([^"]+)", (0\d+)(?:\)| <unfinished)')
REMOVED = re.compile(r'(?:unlink|unlinkat|rmdir)\((?:AT_FDCWD, |\d+, )?"([^"]+)"')
EXPECTED = ("v.db-wal", "v.db-shm", "v.db-lock", "v.db-lock-next", "v.db-ballast", "backup.db", "cli.db",
            "audit.log")


def traced_creations(root: Path) -> list[tuple[str, int]]:
    """(path, mode asked for) of every file or directory the workload created or could have created in ``root``."""
    strace = shutil.which("strace")
    if strace is None:
        if os.environ.get("SCRATCHVAULT_REAL_KEYRING") == "1":  # under scripts/run, which installs strace
            pytest.fail("strace is missing: scripts/run installs it")
        pytest.skip("no strace here; run through 'bash scripts/run test'")
    trace, work = root / "trace.txt", root / "work"
    (work / "tmp").mkdir(parents=True, mode=0o700)
    env = {**child_env(), "SQLITE_TMPDIR": str(work / "tmp"), "TMPDIR": str(work / "tmp"),
           "PYTHON_KEYRING_BACKEND": "tests.support.file_keyring.FileKeyring",
           "SCRATCHVAULT_TEST_KEYRING": str(root / "keyring.json")}
    calls = "trace=open,openat,creat,mkdir,mkdirat,unlink,unlinkat,rmdir"
    subprocess.run([strace, "-f", "-qq", "-o", str(trace), "-e", calls, sys.executable, "-m",
                    "tests.support.file_creation_workload", str(work)], cwd=ROOT, env=env, check=True, timeout=300)
    return creations(trace.read_text().splitlines(), str(work))


def creations(lines: list[str], under: str) -> list[tuple[str, int]]:
    """The first creating call of each path under ``under`` (again after the path is removed; a call that failed
    made nothing): an open with O_CREAT of a file that already exists creates nothing, and its mode does not
    apply. A call strace split across threads (``<unfinished ...>``) is read from its first half."""
    found, present = [], set()
    for line in lines:
        asked = [(path, mode) for path, flags, mode in CREATING.findall(line) if "O_CREAT" in flags]
        asked += MKDIR.findall(line)
        for path, mode in asked:
            if path.startswith(under) and path not in present and " = -1 " not in line:
                found.append((path, int(mode, 8)))
                present.add(path)
        present.difference_update(REMOVED.findall(line))
    return found


def test_every_file_and_directory_is_created_private_under_umask_0(tmp_path: Path) -> None:
    created = traced_creations(tmp_path)
    names = {Path(path).name for path, _ in created}
    assert set(EXPECTED) <= names, f"the workload no longer makes {set(EXPECTED) - names}"
    assert {"v.db", "made", "by", "vault"} <= names
    wide = sorted({f"{path} {oct(mode)}" for path, mode in created if mode & 0o077})
    assert wide == []
