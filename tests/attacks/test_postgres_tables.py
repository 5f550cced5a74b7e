"""Attacks only PostgreSQL allows, by whoever holds the vault's tables (their owner, a DBA, a superuser), while the
vault runs as its least-privilege role: rules, triggers and row security policies planted while it is open; the
row sequence set back or forward; a column altered to another type; a row moved to another owner; a table
dropped. Each is a counted IntegrityError, a NotFound or a StorageError, never altered content, a delete that
reports rows gone that remain, another exception, or a psycopg type in a traceback.
"""

from __future__ import annotations

import traceback

import pytest

from tests.attacks.pg_cells import TABLES
from tests.attacks.postgres_attacker import PostgresAttacker
from vault import IntegrityError, NotFound, Principal, StorageError, Vault, VaultError

ALICE, BOB = Principal("alice"), Principal("bob")
DEFINER = "LANGUAGE plpgsql SECURITY DEFINER"  # the attacker's functions run as it, not as the vault's role
LOOT = "CREATE TABLE loot (taken bytea)"
PLANTED = {  # what the attacker hangs on the vault's tables while it is open
    "rule that keeps rows": ("CREATE RULE keep AS ON DELETE TO rows DO INSTEAD NOTHING",),
    "rule that copies rows": (LOOT, "CREATE RULE copy AS ON DELETE TO rows DO ALSO INSERT INTO loot VALUES "
                                    "(old.wrapped_key)"),
    "trigger that keeps chunks": (f"CREATE FUNCTION keep() RETURNS trigger {DEFINER} AS $$ BEGIN RETURN NULL; END $$",
                                  "CREATE TRIGGER keep BEFORE DELETE ON chunks FOR EACH ROW EXECUTE FUNCTION keep()"),
    "trigger that copies summaries": (LOOT, f"CREATE FUNCTION copy() RETURNS trigger {DEFINER} AS $$ BEGIN INSERT "
                                            "INTO loot VALUES (old.sealed); RETURN old; END $$", "CREATE TRIGGER copy "
                                      "BEFORE DELETE ON summaries FOR EACH ROW EXECUTE FUNCTION copy()"),
    "policy that hides rows from deletes": (
        "ALTER TABLE rows ENABLE ROW LEVEL SECURITY", "ALTER TABLE rows FORCE ROW LEVEL SECURITY",
        "CREATE POLICY everything ON rows USING (true)",
        "CREATE POLICY undeletable ON rows AS RESTRICTIVE FOR DELETE USING (false)"),
}
ALTERED = {  # a column's new type (what its values become), one of its table's columns
    "rows.id as text": ("rows", "id", "text"), "rows.owner_tag as text": ("rows", "owner_tag", "text"),
    "rows.expires_at as text": ("rows", "expires_at", "text"),
    "rows.expires_at as real": ("rows", "expires_at", "real"),
    "rows.key_version as text": ("rows", "key_version", "text"),
    "rows.size_bytes as numeric": ("rows", "size_bytes", "numeric"),
    "rows.wrapped_key as text": ("rows", "wrapped_key", "text"), "rows.metadata as text": ("rows", "metadata", "text"),
    "rows.summary as text": ("rows", "summary", "text"), "rows.chunk as text": ("rows", "chunk", "text"),
    "summaries.sealed as text": ("summaries", "sealed", "text"), "chunks.sealed as text": ("chunks", "sealed", "text"),
    "deletions.counter as numeric": ("deletions", "counter", "numeric"),
    "deletions.body as text": ("deletions", "body", "text"),
}


def open_vault(pg: PostgresAttacker, ring, clock) -> Vault:
    return Vault.open(pg.location, keyring_backend=ring, clock=clock)


def failures(vault: Vault) -> int:
    return vault._counters.snapshot()["integrity_failures"]


def outcome(vault: Vault, call) -> str:
    """"ok", "notfound" or "integrity" (counted); anything else fails the test."""
    before = failures(vault)
    try:
        call()
    except NotFound:
        return "notfound"
    except IntegrityError:
        assert failures(vault) == before + 1, "IntegrityError not counted"
        return "integrity"
    return "ok"


@pytest.mark.parametrize("planted", sorted(PLANTED))
def test_a_rule_trigger_or_policy_planted_while_open_stops_deletes_copies_nothing_and_is_refused_at_open(
        pg, keyring_backend, clock, planted):
    with open_vault(pg, keyring_backend, clock) as vault:
        doomed = vault.put(ALICE, "t", 1, "x", "delete me").id
        vault.put(ALICE, "t", 2, "x", "expire me", ttl_seconds=1)
        pg.run(*PLANTED[planted])
        clock.advance(2)
        assert outcome(vault, lambda: vault.delete(ALICE, doomed)) == "integrity"
        assert outcome(vault, vault.gc) == "integrity"
        assert pg.counts() == (2, 2, 2)  # nothing reported deleted that remains
        if "loot" in " ".join(PLANTED[planted]):
            assert pg.query("SELECT count(*) FROM loot") == [(0,)]  # the copies went with the rolled-back delete
    with pytest.raises(IntegrityError, match="did not make"):
        open_vault(pg, keyring_backend, clock)


def test_the_row_sequence_set_back_never_lets_an_old_id_read_a_new_row(pg, keyring_backend, clock):
    """setval puts the next row at a deleted row's seq: the deleted row's id names that seq, and reads NotFound
    (the whole stored id is compared); set back onto live rows, puts fail (counted) and store nothing."""
    with open_vault(pg, keyring_backend, clock) as vault:
        kept = vault.put(ALICE, "t", 1, "x", "kept").id
        gone = vault.put(BOB, "t", 1, "x", "bob's, deleted").id
        vault.delete(BOB, gone)
        pg.rewind_seq()
        newer = vault.put(ALICE, "t", 2, "x", "alice's, at bob's old seq").id
        assert pg.seq_of(newer) == 2 and newer != gone
        for who in (ALICE, BOB):
            assert outcome(vault, lambda w=who: vault.get(w, gone)) == "notfound"
            assert outcome(vault, lambda w=who: vault.read(w, gone, mode="head", n=5)) == "notfound"
            assert outcome(vault, lambda w=who: vault.delete(w, gone)) == "notfound"
        pg.run("SELECT setval('row_seq', 1, false)")  # onto the live rows 1 and 2
        before = pg.counts()
        for _ in range(2):
            assert outcome(vault, lambda: vault.put(ALICE, "t", 3, "x", "x" * 100_000)) == "integrity"
        assert pg.counts() == before
        assert [vault.get(ALICE, row).content for row in (kept, newer)] == ["kept", "alice's, at bob's old seq"]
        assert vault.get(ALICE, vault.put(ALICE, "t", 4, "x", "past them").id).content == "past them"


@pytest.mark.parametrize("while_open", [True, False], ids=["open", "reopened"])
@pytest.mark.parametrize("altered", sorted(ALTERED))
def test_a_column_altered_to_another_type_is_an_integrity_error_never_another_error(pg, keyring_backend, clock,
                                                                                    altered, while_open):
    table, column, kind = ALTERED[altered]
    vault = open_vault(pg, keyring_backend, clock)
    row = vault.put(ALICE, "t", 1, "x", "content " * 10_000).id
    other = vault.put(ALICE, "t", 2, "x", "other").id
    vault.delete(ALICE, vault.put(ALICE, "t", 3, "x", "so alice has a ledger").id)
    pristine = {"get": vault.get(ALICE, row), "head": vault.read(ALICE, row, mode="head", n=10),
                "list": vault.list_for_turn(ALICE, "t")}
    pg.run(f"ALTER TABLE {table} ALTER COLUMN {column} TYPE {kind} USING {column}::text::{kind}"
           if kind != "text" else f"ALTER TABLE {table} ALTER COLUMN {column} TYPE text")
    if not while_open:
        vault.close()
        with pytest.raises(IntegrityError, match="did not make"):  # a column the vault did not make: refused
            open_vault(pg, keyring_backend, clock)
        return
    calls = {"get": lambda: vault.get(ALICE, row), "head": lambda: vault.read(ALICE, row, mode="head", n=10),
             "list": lambda: vault.list_for_turn(ALICE, "t"), "delete": lambda: vault.delete(ALICE, other),
             "extend": lambda: vault.extend_turn(ALICE, "t", 7200), "gc": lambda: vault.gc(now=clock.now + 10**6)}
    with vault:
        seen = {}
        for name, call in calls.items():
            result = []
            seen[name] = outcome(vault, lambda c=call, r=result: r.append(c()))
            if seen[name] == "ok" and name in pristine:
                assert result == [pristine[name]], f"{name} returned something else after {altered}"
    assert set(seen.values()) != {"ok"}, f"nothing noticed {altered}"


@pytest.mark.parametrize("moved", ["owner_tag", "copy"])
def test_a_row_moved_to_another_owner_is_theirs_to_read_never(pg, keyring_backend, clock, moved):
    with open_vault(pg, keyring_backend, clock) as vault:
        mine = vault.put(ALICE, "t", 1, "x", "alice's").id
        bobs = vault.put(BOB, "t", 1, "x", "bob's").id
        seq, bob_tag = pg.seq_of(mine), pg.row(pg.seq_of(bobs))["owner_tag"]
        if moved == "owner_tag":
            pg.write(seq, "owner_tag", bob_tag)
            pg.write(seq, "turn_tag", pg.row(pg.seq_of(bobs))["turn_tag"])
        else:
            pg.copy_row(seq, pg.next_free_seq(), owner_tag=bob_tag, turn_tag=pg.row(pg.seq_of(bobs))["turn_tag"])
        before = pg.counts()
        assert outcome(vault, lambda: vault.get(BOB, mine)) == ("integrity" if moved == "owner_tag" else "notfound")
        assert outcome(vault, lambda: vault.list_for_turn(BOB, "t")) == "integrity"
        assert outcome(vault, lambda: vault.delete(BOB, mine)) != "ok"
        if moved == "owner_tag":
            assert outcome(vault, lambda: vault.get(ALICE, mine)) == "notfound"
        else:
            assert vault.get(ALICE, mine).content == "alice's"
        assert vault.get(BOB, bobs).content == "bob's" and pg.counts() == before


def storage_error(call) -> StorageError | None:
    """The StorageError a call raises (None if it returns); it names no psycopg type, even in its traceback."""
    try:
        call()
    except StorageError as error:
        text = "".join(traceback.format_exception(error))
        assert "psycopg" not in text and error.__cause__ is None and error.__suppress_context__, text
        return error
    return None


@pytest.mark.parametrize("table", TABLES)
def test_a_dropped_table_is_a_storage_error_with_no_psycopg_type_in_it(pg, keyring_backend, clock, table):
    """Noticed by a call that needs the table, or at the next open (meta is read there); the schema version's table
    alone is made again at open (it holds nothing else), and the vault works on."""
    with open_vault(pg, keyring_backend, clock) as vault:
        row = vault.put(ALICE, "t", 1, "x", "hello").id
        vault.delete(ALICE, vault.put(ALICE, "t", 2, "x", "so alice has a ledger").id)
        pg.run(f"DROP TABLE {table} CASCADE")
        calls = (lambda: vault.get(ALICE, row), lambda: vault.list_for_turn(ALICE, "t"), vault.stats,
                 lambda: vault.put(ALICE, "t", 3, "x", "more"), lambda: vault.delete(ALICE, row), vault.gc,
                 lambda: vault.put(BOB, "t", 1, "x", "a new owner"), lambda: vault.rotate_owner_key("alice"))
        errors = []
        for call in calls:
            try:
                errors.append(storage_error(call))
            except VaultError as error:  # what the lost table held, missed: a NotFound or a keyring refusal
                assert not isinstance(error, StorageError)
    reopened = []
    errors.append(storage_error(lambda: reopened.append(open_vault(pg, keyring_backend, clock))))
    if table == "scratchvault_schema":
        with reopened[0] as vault:
            assert vault.get(ALICE, vault.put(ALICE, "t", 9, "x", "again").id).content == "again"
    else:
        assert any(errors), f"nothing noticed that {table} is gone"
        for vault in reopened:
            vault.close()


@pytest.mark.parametrize("column", ["rows.summary", "rows.chunk", "rows.metadata", "chunks.sealed"])
def test_a_dropped_column_is_a_storage_error_at_open_as_a_dropped_table_is(pg, keyring_backend, clock, column):
    """A column the vault made, dropped behind its back, is noticed when the store opens (as SQLite's file is refused
    when its table text changes), not left for every read to meet; what the column held is lost either way."""
    table, name = column.split(".")
    with open_vault(pg, keyring_backend, clock) as vault:
        vault.put(ALICE, "t", 1, "x", "hello")
    pg.run(f"ALTER TABLE {table} DROP COLUMN {name}")
    error = storage_error(lambda: open_vault(pg, keyring_backend, clock).close())
    assert error is not None and "column" in str(error)
