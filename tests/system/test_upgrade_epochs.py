"""Upgrades for the keys of expiry epochs: a SQLite file of schema 4 and a PostgreSQL schema of version 1, each
made by the release before (``SCHEMA_4_RELEASE``, run in its own process), gain the epoch tables when this
release opens them, keep every row, and serve epoch keys; the release before then refuses the raised file as a
newer scratchvault's and leaves it as it is."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest

from tests.storage.sqlite.layouts import user_version
from tests.support.file_keyring import FileKeyring
from tests.system.releases import Previous, refuses_as_newer, release_tree
from vault import Principal, Vault, storage
from vault.storage.postgres.schema import SCHEMA_VERSION as PG_SCHEMA_VERSION
from vault.storage.sqlite.schema import SCHEMA_VERSION

SCHEMA_4_RELEASE = "4397a9f"  # the last commit before the epoch tables: SQLite schema 4, PostgreSQL schema 1
EPOCH_TABLES = ["epoch_keys", "epoch_reservations", "epoch_tombstones"]
HOUR, EPOCH, NOW = 3600, 500_001, 500_001 * 3600.0


@pytest.fixture(scope="module")
def schema_4_tree(tmp_path_factory) -> Path:
    return release_tree(tmp_path_factory, SCHEMA_4_RELEASE)


def made_by_the_release_before(tree: Path, location, ring: Path) -> str:
    old = Previous(tree, location, ring)
    try:
        assert old.opened in (4, 1)  # its SQLite schema, or its PostgreSQL schema
        return old("put", "alice", 1, "kept across the upgrade")
    finally:
        old.close()


def serves_epoch_keys(location) -> None:
    store = storage.open_store(location)
    try:
        records = store.commitments
        assert records.reserve_epoch(HOUR, EPOCH, NOW, NOW - 60) == 1
        records.record_epoch_commitment(HOUR, EPOCH, 1, b"check")
        assert records.epoch_commitment(HOUR, EPOCH) == (1, b"check") and records.live_epochs() == [(HOUR, EPOCH)]
    finally:
        store.close()


def sqlite_tables(db: Path) -> list[str]:
    with sqlite3.connect(db) as connection:
        return [name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND "
                                                       "name LIKE 'epoch%' ORDER BY name")]


def test_a_sqlite_file_of_schema_4_gains_the_epoch_tables_and_the_release_before_then_refuses_it(
        schema_4_tree, ring, vault_dir):
    db = vault_dir / "schema4.db"
    row = made_by_the_release_before(schema_4_tree, db, ring)
    assert user_version(db) == 4 and sqlite_tables(db) == []
    with Vault.open(db, keyring_backend=FileKeyring()) as vault:
        assert vault.get(Principal("alice"), row).content == "kept across the upgrade"
    assert user_version(db) == SCHEMA_VERSION and sqlite_tables(db) == EPOCH_TABLES
    serves_epoch_keys(db)
    refuses_as_newer(schema_4_tree, db, ring)
    assert user_version(db) == SCHEMA_VERSION and sqlite_tables(db) == EPOCH_TABLES


def pg_version_and_tables(url: str) -> tuple[int, list[str]]:
    with psycopg.connect(url) as connection:
        (version,) = connection.execute("SELECT version FROM scratchvault_schema").fetchone()
        tables = [name for (name,) in connection.execute(
            "SELECT relname FROM pg_class WHERE relkind = 'r' AND relname LIKE 'epoch%%' AND "
            "relnamespace = current_schema()::regnamespace ORDER BY relname")]
    return version, tables


def test_a_postgresql_schema_of_version_1_gains_the_epoch_tables_and_the_release_before_then_refuses_it(
        schema_4_tree, ring, pg_schemas):
    url = pg_schemas("before")
    row = made_by_the_release_before(schema_4_tree, url, ring)
    assert pg_version_and_tables(url) == (1, [])
    with Vault.open(url, keyring_backend=FileKeyring()) as vault:
        assert vault.get(Principal("alice"), row).content == "kept across the upgrade"
    assert pg_version_and_tables(url) == (PG_SCHEMA_VERSION, EPOCH_TABLES)
    serves_epoch_keys(url)
    refuses_as_newer(schema_4_tree, url, ring)
    assert pg_version_and_tables(url) == (PG_SCHEMA_VERSION, EPOCH_TABLES)
