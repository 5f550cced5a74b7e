"""The schema version guards mixed versions on one file: opening raises a version 1 database (rows of format 1)
to version 2, so a scratchvault that knows only version 1, which would rewrap format 2 summaries without
sealing them again, refuses the file from then on; a database from a newer scratchvault is refused untouched."""

from __future__ import annotations

import sqlite3
from contextlib import closing

import pytest

from vault import Principal, StorageError, Vault
from vault.store import SCHEMA_VERSION


def user_version(db_path) -> int:
    with closing(sqlite3.connect(db_path)) as conn:
        return conn.execute("PRAGMA user_version").fetchone()[0]


def set_user_version(db_path, version: int) -> None:
    with closing(sqlite3.connect(db_path)) as conn:
        conn.execute(f"PRAGMA user_version = {version}")


def test_a_version_1_database_is_raised_to_2_on_open_and_its_rows_still_read(db_path, keyring_backend, clock):
    assert SCHEMA_VERSION == 2
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault:
        row = vault.put(Principal("alice"), "t", 1, "x", "kept").id
    set_user_version(db_path, 1)
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault:
        assert user_version(db_path) == 2
        assert vault.get(Principal("alice"), row).content == "kept"


def test_a_database_from_a_newer_scratchvault_is_refused_and_left_as_it_is(db_path, keyring_backend, clock):
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault:
        vault.put(Principal("alice"), "t", 1, "x", "kept")
    set_user_version(db_path, SCHEMA_VERSION + 1)
    with pytest.raises(StorageError, match="newer scratchvault"):
        Vault.open(db_path, keyring_backend=keyring_backend, clock=clock)
    assert user_version(db_path) == SCHEMA_VERSION + 1
