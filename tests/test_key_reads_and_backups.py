"""Bounded keyring reads on a damaged row, and backups made private from their first byte."""

from __future__ import annotations

import os
import sqlite3
import stat
from contextlib import closing

import pytest

from keys.testing import MemoryKeyring
from vault import IntegrityError, Principal, UnsafeStorage, Vault
from vault.storage import backup

ALICE = Principal("alice")


def test_a_row_naming_a_key_version_the_owner_lacks_costs_at_most_two_keyring_reads(db_path, clock):
    """The keyset is reloaded once when a row names an unknown version (rotated elsewhere?); a version still
    unknown after that is tampering at once, not a second reload."""
    ring = MemoryKeyring()
    with Vault.open(db_path, keyring_backend=ring, clock=clock) as vault:
        row = vault.put(ALICE, "t", 1, "x", "hello").id
    with closing(sqlite3.connect(db_path)) as db, db:
        db.execute("UPDATE rows SET key_version = 7")
    for call in (lambda v: v.list_for_turn(ALICE, "t"), lambda v: v.read(ALICE, row)):
        with Vault.open(db_path, keyring_backend=ring, clock=clock, key_cache_seconds=1) as vault:
            before = ring.reads
            with pytest.raises(IntegrityError):
                call(vault)
            assert ring.reads - before <= 2


def test_a_backup_file_is_private_from_its_first_byte_and_never_overwrites(tmp_path, vault, db_path):
    vault.put(ALICE, "t", 1, "x", "hello")
    target = tmp_path / "copy.db"
    old = os.umask(0)
    try:
        backup(db_path, target)
    finally:
        os.umask(old)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    with pytest.raises(UnsafeStorage):
        backup(db_path, target)
    (tmp_path / "link.db").symlink_to(tmp_path / "elsewhere.db")
    with pytest.raises(UnsafeStorage):
        backup(db_path, tmp_path / "link.db")
    assert not (tmp_path / "elsewhere.db").exists()
