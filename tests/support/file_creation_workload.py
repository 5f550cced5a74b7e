"""Run by tests/storage/sqlite/test_files_private_at_creation.py under strace, umask 0: every operation that makes
a file of the vault (directories, database, WAL, SHM, write locks, ballast, a backup, the audit log, SQLite's
temporary files). Argument: the directory to work in (absolute); the command's keyring is the
environment's (tests/support/file_keyring.py)."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

from keys.testing import MemoryKeyring
from vault import Principal, Vault
from vault.ops import cli
from vault.storage import backup

ALICE = Principal("alice")


def main(root: Path) -> None:
    os.umask(0)
    db = root / "made" / "by" / "vault" / "v.db"
    with Vault.open(db, keyring_backend=MemoryKeyring()) as vault:
        row = vault.put(ALICE, "t", 1, "x", "content " * 20000).id
        vault.put(ALICE, "t", 2, "x", io.BytesIO(b"streamed " * 50000))
        vault.list_for_turn(ALICE, "t")
        vault.delete(ALICE, row)
        vault.gc(now=10**10)
        backup(db, db.parent / "backup.db")
    source = root.parent / "observation.txt"  # the caller's file, outside the traced directory
    source.write_text("from the command line")
    audit, cli_db = root / "made" / "audit.log", db.parent / "cli.db"
    assert cli.main(["put", str(source), "--user", "alice", "--turn", "t", "--db", str(cli_db),
                     "--audit-log", str(audit)]) == 0


if __name__ == "__main__":
    main(Path(sys.argv[1]))
