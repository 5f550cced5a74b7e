"""Scheduled key maintenance (``Vault.maintain_keys``, ``scratchvault maintain``): after a run, a copy of the
database taken before a row was deleted or expired no longer opens that row, on either store. The PostgreSQL copy
is made behind the vault's back, as a superuser copying the tables (what an archive, replica or base backup
holds), never through the vault's own code; each test first shows the copy opens the row, so it can fail."""

from __future__ import annotations

import secrets
from pathlib import Path

import psycopg
import pytest

from keys.testing import MemoryKeyring
from tests.attacks.pg_locations import name_indexes_as
from tests.keys.test_key_lifecycle_races import RefusingDeletes
from tests.support.keyring_entries import owner_key_entries
from vault import InvalidArgument, KeyUnavailable, NotFound, Principal, Vault, storage
from vault.storage.postgres.schema import TABLES

ALICE, BOB = Principal("alice"), Principal("bob")


def schema_of(url: str) -> str:
    with psycopg.connect(url, autocommit=True) as connection:
        return connection.execute("SELECT current_schema()").fetchone()[0]


def copy_of(live: str | Path, request: pytest.FixtureRequest) -> str | Path:
    """A copy of the database at ``live``: SQLite's backup of the file; on PostgreSQL the superuser's copy of the
    tables into another schema (a location as the superuser: the copy's tables are the superuser's)."""
    if isinstance(live, Path):
        target = live.with_name(f"copy-{secrets.token_hex(4)}.db")
        storage.backup(live, target)
        return target
    database = request.getfixturevalue("pg_test_database")
    source, into = schema_of(live), schema_of(request.getfixturevalue("pg_schemas")(f"copy-{secrets.token_hex(4)}"))
    with psycopg.connect(database.url(superuser=True), autocommit=True) as admin:
        for table in TABLES:
            admin.execute(f"CREATE TABLE {into}.{table} (LIKE {source}.{table} INCLUDING ALL)")
            name_indexes_as(admin.execute, source, into, table)  # as a restored dump names them
            admin.execute(f"INSERT INTO {into}.{table} SELECT * FROM {source}.{table}")
    return database.url(superuser=True, schema=into)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def live(request: pytest.FixtureRequest, vault_dir: Path) -> str | Path:
    """A location on each store."""
    return vault_dir / "live.db" if request.param == "sqlite" else request.getfixturevalue("pg_schemas")("live")


def opens(location: str | Path, ring: MemoryKeyring, principal: Principal, row: str, clock) -> bool:
    """Whether a vault at ``location`` opens the row (KeyUnavailable: its key version is gone)."""
    with Vault.open(location, keyring_backend=ring, clock=clock) as vault:
        try:
            vault.get(principal, row)
        except KeyUnavailable:
            return False
    return True


def test_after_maintain_a_copy_from_before_a_delete_or_expiry_no_longer_opens_those_rows(live, request, clock):
    ring = MemoryKeyring()
    with Vault.open(live, keyring_backend=ring, clock=clock) as vault:
        deleted = vault.put(ALICE, "t", 1, "x", "deleted later").id
        kept = vault.put(ALICE, "t", 2, "x", "kept").id
        expiring = vault.put(BOB, "t", 1, "x", "expires", ttl_seconds=60).id
        bobs = vault.put(BOB, "t", 2, "x", "bob's, kept").id
        copy = copy_of(live, request)
        vault.delete(ALICE, deleted)
        clock.advance(120)
        with pytest.raises(NotFound):
            vault.get(BOB, expiring)
        early = lambda: clock() - 120  # noqa: E731  (a reader of the copy whose clock says the row is live)
        assert opens(copy, ring, ALICE, deleted, clock) and opens(copy, ring, BOB, expiring, early)  # recoverable
        done = vault.maintain_keys()
        assert (done.owners, done.expired_removed, done.maintained, done.rewrapped, done.retired, done.failed) == (
            2, 1, 2, 2, 2, ())
        assert not opens(copy, ring, ALICE, deleted, clock) and not opens(copy, ring, BOB, expiring, early)
        with Vault.open(live, keyring_backend=ring, clock=early) as past, pytest.raises(NotFound):
            past.get(BOB, expiring)  # collected before the rewrap, never wrapped under the new key (copies made later)
        assert {user[-2:] for _, user in owner_key_entries(ring.secrets)} == {".2"}  # version 1 left the keyring
        assert (vault.get(ALICE, kept).content, vault.get(BOB, bobs).content) == ("kept", "bob's, kept")
        assert vault.stats()["by_key_version"] == {2: {"rows": 2, "bytes": len("kept") + len("bob's, kept")}}
        again = vault.maintain_keys()  # idempotent: one more version each, the same rows, nothing lost
        assert (again.maintained, again.rewrapped, again.retired, again.failed) == (2, 2, 2, ())
        assert vault.get(ALICE, kept).content == "kept"


def test_a_run_whose_keyring_delete_failed_is_reported_and_the_next_run_finishes_it(db_path, request, clock):
    ring = RefusingDeletes()
    with Vault.open(db_path, keyring_backend=ring, clock=clock) as vault:
        deleted = vault.put(ALICE, "t", 1, "x", "deleted later").id
        bobs = vault.put(BOB, "t", 1, "x", "bob's").id
        copy = copy_of(db_path, request)
        vault.delete(ALICE, deleted)
        ring.refusing = True
        failed = vault.maintain_keys()
        alice_tag = vault.audit_tags(user_id="alice")["user"]
        assert {tag for tag, _ in failed.failed} == {alice_tag, vault.audit_tags(user_id="bob")["user"]}
        assert all(isinstance(error, KeyUnavailable) for _, error in failed.failed)
        ring.refusing = False
        assert opens(copy, ring, ALICE, deleted, clock)  # the entry outlived the failed run: the copy still opens
        done = vault.maintain_keys()
        assert (done.maintained, done.failed) == (2, ())
        assert not opens(copy, ring, ALICE, deleted, clock)
        assert vault.get(BOB, bobs).content == "bob's"


def test_a_put_under_another_process_s_cached_old_key_during_maintain_is_rewrapped_before_retiring(db_path, clock):
    """Another process's cached keyset names the old primary for up to its key_cache_seconds: its put lands after
    the rewrap, retire refuses, and maintain rewraps once more instead of leaving the old version alive."""
    ring = MemoryKeyring()
    with Vault.open(db_path, keyring_backend=ring, clock=clock) as vault, \
            Vault.open(db_path, keyring_backend=ring, clock=clock) as other:
        rows = [other.put(ALICE, "t", n, "x", f"row {n}").id for n in range(3)]  # other caches alice's keyset
        late: list[str] = []

        def meanwhile(_: int) -> None:  # after the rewrap's batch committed, before retire
            if not late:
                late.append(other.put(ALICE, "t", 9, "x", "late").id)

        done = vault.maintain_keys(progress=meanwhile)
        assert (done.rewrapped, done.retired, done.failed) == (4, 1, ())
        assert {vault.get(ALICE, row).key_version for row in [*rows, *late]} == {2}


def test_an_owner_whose_row_is_damaged_is_reported_and_the_others_are_maintained(db_path, attacker, clock):
    ring = MemoryKeyring()
    with Vault.open(db_path, keyring_backend=ring, clock=clock) as vault:
        damaged = vault.put(ALICE, "t", 1, "x", "damaged").id
        bobs = vault.put(BOB, "t", 1, "x", "bob's").id
        attacker.flip_at(attacker.seq_of(damaged), "wrapped_key", 5)
        done = vault.maintain_keys()
        assert (done.owners, done.maintained, done.retired) == (2, 1, 1)
        (tag, error), = done.failed
        assert tag == vault.audit_tags(user_id="alice")["user"] and damaged in str(error)
        assert vault.get(BOB, bobs).key_version == 2


def test_a_bad_progress_callback_is_refused_before_anything_changes(vault):
    row = vault.put(ALICE, "t", 1, "x", "kept").id
    with pytest.raises(InvalidArgument):
        vault.maintain_keys(progress="not callable")
    assert vault.get(ALICE, row).key_version == 1 and vault.stats()["by_key_version"] == {1: {"rows": 1, "bytes": 4}}
