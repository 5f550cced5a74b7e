"""Remanence on the real server: what a DELETE, a VACUUM and a VACUUM FULL leave of
deleted rows in the table files and in ``pg_wal``. This is why the PostgreSQL deletion guarantee rests on retiring
the key that wrapped a row, not on the database forgetting it.

A table shaped like a vault's rows table gets 2,000 small rows, each with a random 60-byte canary as its wrapped
key; 1,000 are deleted, and after each step and a CHECKPOINT the relation files (every segment of the table, its
TOAST table and indexes) and every WAL segment are searched for the deleted canaries. Asserted is only what is
robust: deleted keys remain in the table files after DELETE and in the WAL throughout, and only VACUUM FULL (a new
file; the old one unlinked, not wiped) clears the live table files. The counts are printed for the docs.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from tests.support.pg_files import Canaries, data_directory, relation_files, wal_files
from tests.support.postgres import PGDATA_ENV, connect, postgres_admin_url, unavailable, with_role

pytestmark = pytest.mark.postgres

ROWS = 2_000
CANARY_BYTES = 60  # a wrapped data key's size
ROWS_TABLE = """
CREATE TABLE rows (
    seq bigint PRIMARY KEY, id bytea NOT NULL, owner_tag bytea NOT NULL, turn_tag bytea NOT NULL,
    key_version integer NOT NULL, expires_at double precision NOT NULL, size_bytes bigint NOT NULL,
    wrapped_key bytea NOT NULL, metadata bytea NOT NULL
) WITH (autovacuum_enabled = false);
ALTER TABLE rows ALTER COLUMN wrapped_key SET STORAGE EXTERNAL, ALTER COLUMN metadata SET STORAGE EXTERNAL;
CREATE INDEX rows_owner_turn ON rows (owner_tag, turn_tag);
CREATE INDEX rows_expiry ON rows (expires_at);
"""
INSERT_ROW = ("INSERT INTO rows (seq, id, owner_tag, turn_tag, key_version, expires_at, size_bytes, wrapped_key,"
              " metadata) VALUES (%s, %s, %s, %s, 1, 1.8e9, 4096, %s, %s)")


@pytest.fixture
def scratch_database() -> Iterator[tuple[psycopg.Connection, Path]]:
    """A database of its own on the test server (the superuser, autocommit) and the server's data directory;
    the database is dropped afterwards."""
    admin_url = postgres_admin_url()
    if admin_url is None:
        unavailable("SCRATCHVAULT_TEST_POSTGRES is not set")
    name = "remanence_" + secrets.token_hex(4)
    with connect(admin_url) as admin:
        try:
            datadir = data_directory(admin)
        except PermissionError as error:
            unavailable(f"this process may not read the data directory ({error}); run the tests as root")
        if os.environ.get(PGDATA_ENV):  # scripts/run's cluster: the URL and the data directory are one server
            assert Path(os.environ[PGDATA_ENV]).resolve() == datadir.resolve()
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        try:
            with connect(with_role(admin_url, user=None, password=None, dbname=name)) as database:
                yield database, datadir
        finally:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def fill(database: psycopg.Connection, canaries: Canaries) -> dict[int, bytes]:
    """2,000 committed rows of the vault's shape, each with a fresh canary as its wrapped key."""
    keys = {seq: canaries.new() for seq in range(1, ROWS + 1)}
    database.execute(ROWS_TABLE)
    with database.transaction(), database.cursor() as cursor:
        cursor.executemany(INSERT_ROW, [(seq, secrets.token_bytes(16), secrets.token_bytes(32), secrets.token_bytes(32),
                                         key, secrets.token_bytes(80)) for seq, key in keys.items()])
    return keys


def scan(database: psycopg.Connection, datadir: Path, canaries: Canaries, deleted: set[bytes], live: set[bytes]
         ) -> dict[str, int]:
    """After a CHECKPOINT (dirty pages reach the files): the canaries found in the table's files and in pg_wal."""
    database.execute("CHECKPOINT")
    table = relation_files(database, datadir, "rows")
    wal = wal_files(datadir)
    return {"deleted in table files": len(canaries.found_in(table, deleted)),
            "live in table files": len(canaries.found_in(table, live)),
            "deleted in pg_wal": len(canaries.found_in(wal, deleted))}


def test_deleted_wrapped_keys_outlive_delete_and_vacuum_in_the_files_and_the_wal(scratch_database, capsys):
    database, datadir = scratch_database
    canaries = Canaries(CANARY_BYTES)
    keys = fill(database, canaries)
    database.execute("DELETE FROM rows WHERE seq % 2 = 0")
    deleted = {key for seq, key in keys.items() if seq % 2 == 0}
    live = set(keys.values()) - deleted
    assert len(deleted) == len(live) == ROWS // 2

    counts = {"DELETE": scan(database, datadir, canaries, deleted, live)}
    database.execute("VACUUM rows")
    counts["VACUUM"] = scan(database, datadir, canaries, deleted, live)
    database.execute("VACUUM FULL rows")
    counts["VACUUM FULL"] = scan(database, datadir, canaries, deleted, live)
    with capsys.disabled():
        print(f"\nremanence of {len(deleted):,} deleted of {ROWS:,} rows (60-byte wrapped keys), after each step"
              " + CHECKPOINT:")
        for step, found in counts.items():
            print(f"  {step:<12}" + ", ".join(f"{where}: {count}" for where, count in found.items()))

    # the scan reads the right files: every live key is found in them at every step
    assert all(found["live in table files"] == len(live) for found in counts.values()), counts
    assert counts["DELETE"]["deleted in table files"] > 0, counts
    assert counts["VACUUM FULL"]["deleted in table files"] == 0, counts
    assert all(found["deleted in pg_wal"] > 0 for found in counts.values()), counts
