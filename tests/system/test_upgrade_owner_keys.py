"""Upgrade to tables keyed by owner (PostgreSQL schema 4): a schema of version 3, made by the release before
(``SCHEMA_3_RELEASE``, run in its own process), has ``owner_tag`` put into ``chunks`` and ``summaries`` from their
rows and every primary key of rows, chunks and summaries started with it when this release opens it (under the
migration's advisory lock); its rows then read, list, extend, rewrap and delete beside new ones, no owner reads
another's, and the release before refuses the raised schema as a newer scratchvault's."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from tests.support.file_keyring import FileKeyring
from tests.system.releases import Previous, refuses_as_newer, release_tree
from vault import NotFound, Principal, Vault

SCHEMA_3_RELEASE = "bc53758"  # the last commit before tables keyed by owner: PostgreSQL schema 3
ALICE, BOB = Principal("alice"), Principal("bob")
SMALL, BIG = "small, from before " * 10, "x" * 150_000  # one chunk (held in its row), three
KEYS = ("SELECT conrelid::regclass::text, pg_get_constraintdef(oid) FROM pg_constraint WHERE contype = 'p' "
        "AND conrelid IN ('rows'::regclass, 'summaries'::regclass, 'chunks'::regclass) ORDER BY 1")
# chunks (all in their table: rows over one chunk) whose owner is their row's, of all chunks
CHUNK_OWNERS = ("SELECT count(*) FILTER (WHERE EXISTS (SELECT 1 FROM rows r WHERE r.seq = c.seq "
                "AND r.owner_tag = c.owner_tag)), count(*) FROM chunks c")


@pytest.fixture(scope="module")
def schema_3_tree(tmp_path_factory) -> Path:
    return release_tree(tmp_path_factory, SCHEMA_3_RELEASE)


def primary_keys(url: str) -> dict[str, str]:
    with psycopg.connect(url) as connection:
        return dict(connection.execute(KEYS).fetchall())


def test_a_postgresql_schema_of_version_3_is_keyed_by_owner_and_keeps_its_rows(schema_3_tree, ring, pg_schemas):
    location = pg_schemas("before")
    old = Previous(schema_3_tree, location, ring)
    try:
        small, big = old("put", "alice", 1, SMALL), old("put", "alice", 2, BIG)
        bobs, doomed = old("put", "bob", 3, BIG), old("put", "alice", 4, "deleted after the upgrade")
    finally:
        old.close()
    assert primary_keys(location) == {"chunks": "PRIMARY KEY (seq, idx)", "rows": "PRIMARY KEY (seq)",
                                      "summaries": "PRIMARY KEY (seq)"}
    with Vault.open(location, keyring_backend=FileKeyring()) as vault:
        assert primary_keys(location) == {"chunks": "PRIMARY KEY (owner_tag, seq, idx)",
                                          "rows": "PRIMARY KEY (owner_tag, seq)",
                                          "summaries": "PRIMARY KEY (owner_tag, seq)"}
        with psycopg.connect(location) as connection:
            assert connection.execute(CHUNK_OWNERS).fetchone() == (6, 6)  # both big rows' three chunks
        new = vault.put(ALICE, "t", 5, "x", "after").id
        assert [vault.get(ALICE, row).content for row in (small, big, new)] == [SMALL, BIG, "after"]
        assert vault.get(BOB, bobs).content == BIG
        with pytest.raises(NotFound):
            vault.get(BOB, big)
        assert vault.read(ALICE, big, "range", start=140_000, end=140_004).content == "xxxx"
        assert sorted(row.id for row in vault.list_for_turn(ALICE, "t")) == sorted([small, big, doomed, new])
        vault.delete(ALICE, doomed)
        vault.extend_turn(ALICE, "t", 7200)
        vault.rotate_owner_key("alice")
        assert vault.rewrap("alice") == 3
        assert [vault.get(ALICE, row).content for row in (small, big, new)] == [SMALL, BIG, "after"]
    refuses_as_newer(schema_3_tree, location, ring)
