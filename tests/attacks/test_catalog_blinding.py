"""A trigger planted after open makes the vault's own pooled session create temporary views named like the catalog
relations the schema check reads (a session's temporary relations come first on its search path): the check must
still see the planted objects, so a delete copies nothing, gc keeps no ended epoch key and a shred no live key.
PostgreSQL only (SQLite has no search path)."""

from __future__ import annotations

import contextlib

import pytest

from keys.testing import MemoryKeyring
from tests.attacks.stores import STORE
from tests.attacks.test_epoch_closing_schema import assert_no_ended_key_outlives, postgres_hiding_trigger
from tests.support.clock import T0, FakeClock
from tests.support.epochs import assert_nothing_of
from vault import IntegrityError, Principal, Vault, storage

ALICE, BOB = Principal("alice"), Principal("bob")
# a trigger function that, in whichever session fires it, first blinds that session's catalog check: temporary
# relations are searched before pg_catalog
BLIND = ("CREATE OR REPLACE TEMP VIEW pg_trigger AS SELECT * FROM pg_catalog.pg_trigger WHERE false; "
         "CREATE OR REPLACE TEMP VIEW pg_rewrite AS SELECT * FROM pg_catalog.pg_rewrite WHERE false; "
         "CREATE OR REPLACE TEMP VIEW pg_constraint AS SELECT * FROM pg_catalog.pg_constraint "
         "WHERE contype = 'p'; ")


@pytest.mark.skipif(STORE != "postgres", reason="PostgreSQL's search path")
def test_pg_temp_views_blind_the_catalog_check_and_a_trigger_copies_a_deleted_row(vault, attacker):
    row = vault.put(ALICE, "t", 1, "x", "secret").id
    attacker.run("SET LOCAL ROLE vault_app",  # the tables' owner role
                 "CREATE TABLE loot (wrapped bytea, summary bytea)",
                 "CREATE FUNCTION copy() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN " + BLIND +
                 "INSERT INTO loot VALUES (old.wrapped_key, old.summary); "
                 "RETURN old; END $$",
                 "CREATE TRIGGER copy BEFORE DELETE ON rows FOR EACH ROW EXECUTE FUNCTION copy()")
    with contextlib.suppress(IntegrityError):  # refused: the schema is not the vault's
        vault.delete(ALICE, row)  # refused, or done without the planted trigger copying anything
    assert attacker.query("SELECT count(*) FROM loot") == [(0,)]


@pytest.mark.skipif(STORE != "postgres", reason="PostgreSQL's search path")
def test_temporary_views_in_the_vaults_session_do_not_blind_the_check_of_an_epochs_closing(db_path, attacker,
                                                                                           location_named):
    assert_no_ended_key_outlives(db_path, attacker, location_named, postgres_hiding_trigger(BLIND))


@pytest.mark.skipif(STORE != "postgres", reason="PostgreSQL's search path")
def test_pg_temp_views_blind_the_check_and_a_shred_keeps_the_live_key(db_path, attacker, location_named):
    from tests.support.keyring_entries import owner_key_entries

    ring, clock = MemoryKeyring(), FakeClock(T0)
    with Vault.open(db_path, keyring_backend=ring, clock=clock) as vault:
        vault.put(BOB, "t", 1, "x", "bob stays")
        bob = {user.split(".")[0] for _, user in owner_key_entries(ring.secrets)}
        row = vault.put(ALICE, "t", 1, "x", "the dentist is on Tuesday").id
    backup = location_named("backup.db")
    storage.backup(db_path, backup)
    with Vault.open(db_path, keyring_backend=ring, clock=clock) as vault:  # e.g. `scratchvault shred`: no cache
        attacker.run("SET LOCAL ROLE vault_app",
                     "CREATE TABLE stash AS SELECT * FROM owner_keys",  # every commitment, put aside
                     "DELETE FROM owner_keys", "DELETE FROM key_reservations",  # hidden from the shred's read
                     "CREATE FUNCTION back() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN " + BLIND +
                     "INSERT INTO owner_keys SELECT * FROM stash ON CONFLICT DO NOTHING; RETURN NULL; END $$",
                     "CREATE TRIGGER back AFTER DELETE ON owners FOR EACH STATEMENT EXECUTE FUNCTION back()")
        try:
            vault.shred_owner("alice")  # a shred that returns must have destroyed every key
        except IntegrityError:  # refused; the writer removes the trigger, the operator runs it again
            attacker.run("DROP TRIGGER back ON owners")
            vault.shred_owner("alice")
        left = [user for _, user in owner_key_entries(ring.secrets) if user.split(".")[0] not in bob]
    with Vault.open(backup, keyring_backend=ring, clock=clock) as copy:
        assert left == [], left
        assert_nothing_of(copy, ALICE, row)
