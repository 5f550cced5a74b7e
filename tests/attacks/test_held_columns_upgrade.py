"""The upgrade that gives ``rows`` its ``summary`` and ``chunk`` columns, as a writer of the SQLite file meets it: the
columns planted before this release first opens a file of the release before (their definitions otherwise, or
exactly and already holding parts), and a file lowered back to schema 5 with the columns dropped. A column defined
otherwise is refused with the file; planted parts are read as the attack tests read them (IntegrityError, or what
the row holds); a dropped column loses its rows' parts, which then read as damaged, never as other content."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from keys.testing import MemoryKeyring
from tests.storage.sqlite.layouts import legacy_file, user_version
from vault import IntegrityError, Principal, Vault
from vault.storage.sqlite.schema import SCHEMA_VERSION

pytestmark = pytest.mark.sqlite_only("the SQLite file's schema upgrade (PostgreSQL's catalog: "
                                     "tests/attacks/test_postgres_tables.py)")
ALICE = Principal("alice")
SMALL = "one chunk " * 40


def altered(db: Path, *statements: str, version: int | None = None) -> None:
    """Run ``statements`` on the file behind the vault's back (and give it schema ``version``)."""
    with closing(sqlite3.connect(db)) as connection:
        for statement in statements:
            connection.execute(statement)
        if version is not None:
            connection.execute(f"PRAGMA user_version = {version}")
        connection.commit()


@pytest.mark.parametrize("columns", [
    ("summary BLOB DEFAULT x'00'", "chunk BLOB"), ("summary BLOB", "chunk BLOB NOT NULL DEFAULT x''"),
    ("summary TEXT", "chunk BLOB"), ("summary BLOB", "chunk BLOB CHECK (chunk IS NULL)"),
    ("chunk BLOB", "summary BLOB"), ("summary BLOB",),
], ids=["default", "not_null", "text", "check", "reordered", "half"])
def test_held_columns_planted_otherwise_before_the_upgrade_refuse_the_file(tmp_path, columns):
    db = legacy_file(tmp_path / "v.db")
    altered(db, *(f"ALTER TABLE rows ADD COLUMN {column}" for column in columns))
    with pytest.raises(IntegrityError, match="did not make"):
        Vault.open(db, keyring_backend=MemoryKeyring())
    assert user_version(db) == 2  # nothing of the upgrade was kept


def test_held_columns_planted_exactly_with_another_rows_parts_read_as_damaged(tmp_path):
    ring, db = MemoryKeyring(), legacy_file(tmp_path / "v.db")
    with Vault.open(db, keyring_backend=ring) as vault:
        victim, other = vault.put(ALICE, "t", 1, "x", SMALL).id, vault.put(ALICE, "t", 2, "x", "another " * 40).id
    with closing(sqlite3.connect(db)) as connection:  # the parts of rows as this release wrote them
        parts = {row_id: connection.execute("SELECT summary, chunk FROM rows WHERE id = ?",
                                            (bytes.fromhex(row_id),)).fetchone() for row_id in (victim, other)}
    victim_row = f"FROM rows WHERE id = x'{victim}'"
    altered(db, f"INSERT INTO summaries SELECT seq, summary {victim_row}",  # laid out as before schema 6, in a
            f"INSERT INTO chunks SELECT seq << 20, chunk {victim_row}",  # file of schema 5 whose columns were
            f"UPDATE rows SET summary = x'{parts[other][0].hex()}', chunk = x'{parts[other][1].hex()}' "  # planted
            f"WHERE id = x'{victim}'", version=5)  # holding the other row's parts
    with Vault.open(db, keyring_backend=ring) as vault:
        assert user_version(db) == SCHEMA_VERSION
        with pytest.raises(IntegrityError):
            vault.get(ALICE, victim)
        with pytest.raises(IntegrityError):
            vault.list_for_turn(ALICE, "t")
        assert vault.get(ALICE, other).content == "another " * 40


def test_a_file_lowered_to_schema_5_without_its_held_columns_reads_their_rows_as_damaged(tmp_path):
    ring, db = MemoryKeyring(), tmp_path / "v.db"
    with Vault.open(db, keyring_backend=ring) as vault:
        held = vault.put(ALICE, "t", 1, "x", SMALL).id
        big = vault.put(ALICE, "u", 1, "x", "big " * 40_000).id
    altered(db, "ALTER TABLE rows DROP COLUMN chunk", "ALTER TABLE rows DROP COLUMN summary", version=5)
    with Vault.open(db, keyring_backend=ring) as vault:
        assert user_version(db) == SCHEMA_VERSION
        with pytest.raises(IntegrityError):
            vault.get(ALICE, held)
        assert vault.read(ALICE, big, "head", n=8).content == "big big "  # its chunks are in their table
        with pytest.raises(IntegrityError):
            vault.list_for_turn(ALICE, "t")
