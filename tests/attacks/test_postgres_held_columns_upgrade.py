"""The upgrade that gives PostgreSQL's ``rows`` its ``summary`` and ``chunk`` columns (schema 3), as whoever holds the
tables meets it: the columns planted before this release first opens a schema of version 2 (otherwise defined, or
exactly and holding another row's parts), and the table's storage parameters set otherwise. The first is refused
with the database; planted parts read as damaged; storage parameters move where dead copies sit (which the
threat model leaves to the keys' destruction, "Deletion"), never what a read returns."""

from __future__ import annotations

import pytest

from tests.attacks.postgres_attacker import PostgresAttacker
from vault import IntegrityError, Principal, Vault

ALICE = Principal("alice")
AS_VERSION_2 = (  # every row laid out as before schema 3, the columns dropped, the version lowered
    "INSERT INTO summaries (owner_tag, seq, sealed) SELECT owner_tag, seq, summary FROM rows WHERE summary IS NOT NULL",
    "INSERT INTO chunks (owner_tag, seq, idx, sealed) SELECT owner_tag, seq, 0, chunk FROM rows "
    "WHERE chunk IS NOT NULL",
    "ALTER TABLE rows DROP COLUMN summary, DROP COLUMN chunk", "UPDATE scratchvault_schema SET version = 2")


def open_vault(pg: PostgresAttacker, ring, clock) -> Vault:
    return Vault.open(pg.location, keyring_backend=ring, clock=clock)


@pytest.mark.parametrize("columns", ["summary bytea DEFAULT '\\x00'::bytea, ADD COLUMN chunk bytea",
                                     "summary bytea, ADD COLUMN chunk bytea NOT NULL DEFAULT ''::bytea",
                                     "summary text, ADD COLUMN chunk bytea",
                                     "summary bytea, ADD COLUMN chunk bytea GENERATED ALWAYS AS (metadata) STORED"],
                         ids=["default", "not_null", "text", "generated"])
def test_held_columns_planted_otherwise_before_the_upgrade_refuse_the_database(pg, keyring_backend, clock, columns):
    with open_vault(pg, keyring_backend, clock) as vault:
        vault.put(ALICE, "t", 1, "x", "before the upgrade")
    pg.run(*AS_VERSION_2, f"ALTER TABLE rows ADD COLUMN {columns}")
    with pytest.raises(IntegrityError, match="did not make"):
        open_vault(pg, keyring_backend, clock)
    assert pg.query("SELECT version FROM scratchvault_schema") == [(2,)]


def test_held_columns_planted_exactly_with_another_rows_parts_read_as_damaged(pg, keyring_backend, clock):
    with open_vault(pg, keyring_backend, clock) as vault:
        victim, other = vault.put(ALICE, "t", 1, "x", "victim " * 40).id, vault.put(ALICE, "t", 2, "x", "other").id
    summary, chunk = pg.query("SELECT summary, chunk FROM rows WHERE id = ?", bytes.fromhex(other))[0]
    pg.run(*AS_VERSION_2, "ALTER TABLE rows ADD COLUMN summary bytea, ADD COLUMN chunk bytea",
           ("UPDATE rows SET summary = ?, chunk = ? WHERE id = ?", summary, chunk, bytes.fromhex(victim)))
    with open_vault(pg, keyring_backend, clock) as vault:
        with pytest.raises(IntegrityError):
            vault.get(ALICE, victim)
        with pytest.raises(IntegrityError):
            vault.list_for_turn(ALICE, "t")
        assert vault.get(ALICE, other).content == "other"


def test_storage_parameters_set_otherwise_change_no_read(pg, keyring_backend, clock):
    with open_vault(pg, keyring_backend, clock) as vault:
        small, big = vault.put(ALICE, "t", 1, "x", "small " * 40).id, vault.put(ALICE, "t", 2, "x", "b" * 150_000).id
    pg.run("ALTER TABLE rows SET (toast_tuple_target = 128, autovacuum_enabled = false, fillfactor = 10)")
    with open_vault(pg, keyring_backend, clock) as vault:
        extra = vault.put(ALICE, "t", 3, "x", "after " * 40).id
        assert [vault.get(ALICE, row).content for row in (small, big, extra)] == ["small " * 40, "b" * 150_000,
                                                                                  "after " * 40]
