"""A writer of the file plants SQL of its own: a trigger that makes deletes keep their rows, one that copies each
deleted row's wrapped key and summary to a side table, a view, a table or an index. The vault refuses such a file
at open and doctor fails it; planted while the vault is open, a trigger stops delete, gc and shred's row deletion
with an IntegrityError instead of letting them report rows gone that remain.

On PostgreSQL the same attacks are the owner's or a superuser's triggers, rules and row security policies on the
vault's tables (a table, view or index beside them keeps nothing a delete removes, and is not refused)."""

from __future__ import annotations

import pytest

from tests.attacks.stores import STORE
from vault import IntegrityError, KeyUnavailable, NotFound, Principal, Vault
from vault.ops.doctor import diagnose
from vault.storage import describe

ALICE = Principal("alice")
SQLITE_KEEP = "CREATE TRIGGER keep BEFORE DELETE ON rows BEGIN SELECT RAISE(IGNORE); END"
SQLITE = {
    "keep": (SQLITE_KEEP,),
    "copy": ("CREATE TABLE loot (wrapped BLOB, summary BLOB)",
             "CREATE TRIGGER copy BEFORE DELETE ON rows BEGIN INSERT INTO loot VALUES "
             "(old.wrapped_key, old.summary); END"),
}
SQLITE_PLANTED = {
    "trigger that keeps rows": SQLITE["keep"],
    "trigger that copies rows": SQLITE["copy"],
    "trigger on the summaries": ("CREATE TRIGGER s AFTER INSERT ON summaries BEGIN SELECT 1; END",),
    "view": ("CREATE VIEW everything AS SELECT * FROM rows",),
    "table": ("CREATE TABLE notes (body TEXT)",),
    "index": ("CREATE INDEX by_size ON rows (size_bytes)",),
    "index under the vault's own name": ("DROP INDEX rows_expiry",
                                         "CREATE INDEX rows_expiry ON summaries (substr(sealed, 1, 4))"),
    "partial index under the vault's own name": ("DROP INDEX rows_owner_turn", "CREATE INDEX rows_owner_turn ON "
                                                 "rows (owner_tag, turn_tag) WHERE key_version > 1"),
}
# PostgreSQL: what its owner or a superuser can hang on the vault's tables (the functions run as their definer)
LOOT = "CREATE TABLE loot (wrapped bytea, summary bytea)"
POSTGRES = {
    "keep": ("CREATE FUNCTION keep() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$",
             "CREATE TRIGGER keep BEFORE DELETE ON rows FOR EACH ROW EXECUTE FUNCTION keep()"),
    "copy": (LOOT, "CREATE FUNCTION copy() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$ BEGIN "
                   "INSERT INTO loot VALUES (old.wrapped_key, old.summary); "
                   "RETURN old; END $$",
             "CREATE TRIGGER copy BEFORE DELETE ON rows FOR EACH ROW EXECUTE FUNCTION copy()"),
}
POSTGRES_PLANTED = {
    "trigger that keeps rows": POSTGRES["keep"],
    "trigger that copies rows": POSTGRES["copy"],
    "trigger that keeps chunks": (POSTGRES["keep"][0], "CREATE TRIGGER keep BEFORE DELETE ON chunks FOR EACH ROW "
                                                       "EXECUTE FUNCTION keep()"),
    "statement trigger on the summaries": ("CREATE FUNCTION noop() RETURNS trigger LANGUAGE plpgsql AS "
                                           "$$ BEGIN RETURN NULL; END $$", "CREATE TRIGGER s AFTER INSERT ON "
                                           "summaries FOR EACH STATEMENT EXECUTE FUNCTION noop()"),
    "rule that keeps rows": ("CREATE RULE keep AS ON DELETE TO rows DO INSTEAD NOTHING",),
    "rule that copies rows": (LOOT, "CREATE RULE copy AS ON DELETE TO rows DO ALSO INSERT INTO loot VALUES "
                                    "(old.wrapped_key, NULL)"),
    "rule on the ledgers": ("CREATE TABLE old_ledgers (body bytea)", "CREATE RULE keep AS ON UPDATE TO deletions "
                            "DO ALSO INSERT INTO old_ledgers VALUES (old.body)"),
    "row security policy": ("ALTER TABLE rows ENABLE ROW LEVEL SECURITY", "ALTER TABLE rows FORCE ROW LEVEL "
                            "SECURITY", "CREATE POLICY hide ON rows USING (key_version > 1)"),
}
KEEP, COPY = (POSTGRES if STORE == "postgres" else SQLITE).values()
PLANTED = POSTGRES_PLANTED if STORE == "postgres" else SQLITE_PLANTED


def test_a_trigger_planted_while_the_vault_is_open_stops_delete_gc_and_shred_rows(vault, attacker, clock):
    kept = vault.put(ALICE, "t", 1, "x", "delete me").id
    vault.put(ALICE, "t", 2, "x", "expire me", ttl_seconds=1)
    attacker.run(*KEEP)
    failures = vault.stats()["counters"]["integrity_failures"]
    with pytest.raises(IntegrityError):
        vault.delete(ALICE, kept)
    clock.advance(2)
    with pytest.raises(IntegrityError):
        vault.gc()
    assert attacker.counts()[0] == 2  # nothing was reported deleted that remains: both calls failed
    assert vault.stats()["counters"]["integrity_failures"] == failures + 2  # counted and logged, like any other
    with pytest.raises(IntegrityError):
        vault.shred_owner("alice")  # the keys go first, so the rows that remain are unreadable all the same
    with pytest.raises((KeyUnavailable, NotFound)):
        vault.read(ALICE, kept)


def test_copying_trigger_planted_while_open_copies_nothing(vault, attacker):
    row = vault.put(ALICE, "t", 1, "x", "secret").id
    attacker.run(*COPY)
    with pytest.raises(IntegrityError):
        vault.delete(ALICE, row)
    assert attacker.query("SELECT count(*) FROM loot") == [(0,)]


@pytest.mark.parametrize("planted", sorted(PLANTED))
def test_a_file_holding_planted_objects_is_refused_at_open_and_failed_by_doctor(db_path, keyring_backend, clock,
                                                                                attacker, planted):
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault:
        vault.put(ALICE, "t", 1, "x", "hello")
    attacker.run(*PLANTED[planted])
    with pytest.raises(IntegrityError, match="did not make"):
        Vault.open(db_path, keyring_backend=keyring_backend, clock=clock)
    lines, safe = diagnose(db_path)
    assert not safe and any(line.startswith("FAIL  schema objects scratchvault did not make") for line in lines)


def test_what_scratchvault_and_sqlite_make_themselves_is_not_refused(db_path, keyring_backend, clock, attacker):
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault:
        row = vault.put(ALICE, "t", 1, "x", "hello").id
    attacker.run("ANALYZE")  # sqlite_stat1: an operator's ANALYZE must not lock the vault
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault:
        assert vault.read(ALICE, row).content == "hello"
    assert [finding for finding in describe(db_path) if finding.status == "FAIL"] == []
