"""Upgrade to rows that hold their summary and only chunk: a SQLite file of schema 5, and a PostgreSQL schema of
version 2, made by the release before (``SCHEMA_5_RELEASE``, run in its own process) gain the columns when this
release opens them (on PostgreSQL under the migration's advisory lock); their rows keep their summaries and chunks
in their tables and read, list, extend, rewrap and delete beside new rows held whole; the release before then
refuses the raised store as a newer scratchvault's."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from tests.support.file_keyring import FileKeyring
from tests.system.releases import Previous, refuses_as_newer, release_tree
from vault import Principal, Vault
from vault.storage.postgres.schema import SCHEMA_VERSION as PG_SCHEMA_VERSION
from vault.storage.sqlite.schema import SCHEMA_VERSION

SCHEMA_5_RELEASE = "8294529"  # the last commit before rows held their parts: SQLite schema 5, PostgreSQL schema 2
ALICE = Principal("alice")
SMALL, BIG = "small, from before " * 10, "x" * 150_000  # one chunk, three
HELD = ("SELECT count(summary), count(chunk), (SELECT count(*) FROM summaries), (SELECT count(*) FROM chunks) "
        "FROM rows")
BEFORE = "SELECT 0, 0, (SELECT count(*) FROM summaries), (SELECT count(*) FROM chunks)"


@pytest.fixture(scope="module")
def schema_5_tree(tmp_path_factory) -> Path:
    return release_tree(tmp_path_factory, SCHEMA_5_RELEASE)


def sqlite_facts(db: Path) -> tuple[int, tuple[int, ...]]:
    """(schema version, (rows holding a summary, rows holding a chunk, summaries in their table, chunks in theirs))."""
    with sqlite3.connect(db) as connection:
        raised = "chunk" in {name for _, name, *_ in connection.execute("PRAGMA table_info(rows)")}
        return (connection.execute("PRAGMA user_version").fetchone()[0],
                connection.execute(HELD if raised else BEFORE).fetchone())


def pg_facts(url: str) -> tuple[int, tuple[int, ...]]:
    """As ``sqlite_facts``, of a PostgreSQL schema."""
    with psycopg.connect(url) as connection:
        raised = connection.execute("SELECT count(*) FROM information_schema.columns WHERE table_name = 'rows' "
                                    "AND column_name = 'chunk' AND table_schema = current_schema()").fetchone()[0]
        return (connection.execute("SELECT version FROM scratchvault_schema").fetchone()[0],
                connection.execute(HELD if raised else BEFORE).fetchone())


def upgraded_beside_new_rows(tree: Path, ring: Path, location, facts: Callable, versions: tuple[int, int]) -> None:
    old = Previous(tree, location, ring)
    try:
        assert old.opened == 5  # the release before (its process reports its SQLite schema, on either store)
        small, big = old("put", "alice", 1, SMALL), old("put", "alice", 2, BIG)
        doomed = old("put", "alice", 3, "deleted after the upgrade")
    finally:
        old.close()
    assert facts(location) == (versions[0], (0, 0, 3, 5))
    with Vault.open(location, keyring_backend=FileKeyring()) as vault:
        new = vault.put(ALICE, "t", 4, "x", "held whole").id
        assert facts(location) == (versions[1], (1, 1, 3, 5))  # the new row in one tuple; the old ones as they were
        assert [vault.get(ALICE, row).content for row in (small, big, new)] == [SMALL, BIG, "held whole"]
        assert vault.read(ALICE, small, "range", start=6, end=10).content == SMALL[6:10]
        assert [row.id for row in vault.list_for_turn(ALICE, "t")] == [small, big, doomed, new]
        vault.delete(ALICE, doomed)
        assert facts(location)[1] == (1, 1, 2, 4)
        vault.extend_turn(ALICE, "t", 7200)  # summaries sealed again go into their rows; the old copies go
        assert facts(location)[1] == (3, 1, 0, 4)
        vault.rotate_owner_key("alice")
        assert vault.rewrap("alice") == 3
        assert [vault.get(ALICE, row).content for row in (small, big, new)] == [SMALL, BIG, "held whole"]
    refuses_as_newer(tree, location, ring)


def test_a_sqlite_file_of_schema_5_keeps_its_rows_readable_beside_rows_held_whole(schema_5_tree, ring, vault_dir):
    upgraded_beside_new_rows(schema_5_tree, ring, vault_dir / "schema5.db", sqlite_facts, (5, SCHEMA_VERSION))


def test_a_postgresql_schema_of_version_2_keeps_its_rows_readable_beside_rows_held_whole(schema_5_tree, ring,
                                                                                         pg_schemas):
    upgraded_beside_new_rows(schema_5_tree, ring, pg_schemas("before"), pg_facts, (2, PG_SCHEMA_VERSION))
