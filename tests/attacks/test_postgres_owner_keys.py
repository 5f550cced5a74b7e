"""Attacks on the PostgreSQL tables keyed by (owner_tag, seq): what seq alone no longer keeps unique, by whoever
holds the vault's tables while the vault runs as its least-privilege role."""

from __future__ import annotations

import contextlib

import pytest

from tests.attacks.postgres_attacker import PostgresAttacker
from vault import IntegrityError, Principal, Vault

ALICE, BOB = Principal("alice"), Principal("bob")


def integrity_failures(vault: Vault) -> int:
    return vault._counters.snapshot()["integrity_failures"]


def test_the_row_sequence_set_back_onto_another_owners_live_row_fails_the_put(pg: PostgresAttacker,
                                                                              keyring_backend, clock):
    """threat_model.md, "PostgreSQL (several hosts)": the row sequence set back onto live rows is a counted
    IntegrityError and the put stores nothing, whoever owns the live row it lands on."""
    with Vault.open(pg.location, keyring_backend=keyring_backend, clock=clock) as vault:
        bobs = vault.put(BOB, "t", 1, "x", "bob's").id
        pg.run(("SELECT setval('row_seq', ?, false)", pg.seq_of(bobs)))  # the next put lands on bob's live seq
        before, failures = pg.counts(), integrity_failures(vault)
        with pytest.raises(IntegrityError):
            vault.put(ALICE, "t", 1, "x", "alice's, at bob's seq")
        assert integrity_failures(vault) == failures + 1
        assert pg.counts() == before
        assert pg.query("SELECT count(*) FROM rows WHERE seq = ?", pg.seq_of(bobs)) == [(1,)]


def test_gc_removes_every_expired_row_when_two_owners_rows_share_a_seq(pg: PostgresAttacker, keyring_backend, clock,
                                                                       monkeypatch):
    from vault.storage.postgres import store as postgres_store

    monkeypatch.setattr(postgres_store, "GC_BATCH", 1)
    with Vault.open(pg.location, keyring_backend=keyring_backend, clock=clock) as vault:
        bobs = vault.put(BOB, "t", 1, "x", "bob's", ttl_seconds=60).id
        pg.run(("SELECT setval('row_seq', ?, false)", pg.seq_of(bobs)))
        with contextlib.suppress(IntegrityError):  # refused, if seqs are kept unique: nothing left to collect
            vault.put(ALICE, "t", 1, "x", "alice's, at bob's seq", ttl_seconds=60)
        stored = pg.counts()[0]
        clock.advance(61)
        assert vault.gc() == stored
        assert pg.counts()[0] == 0


def test_a_trigger_named_as_the_allowlist_describes_citus_trigger_is_refused(pg: PostgresAttacker, keyring_backend,
                                                                             clock):
    with Vault.open(pg.location, keyring_backend=keyring_backend, clock=clock) as vault:
        doomed = vault.put(ALICE, "t", 1, "x", "l" * 200_000).id
        pg.run("CREATE FUNCTION keep() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$ BEGIN RETURN NULL; "
               "END $$", 'CREATE TRIGGER "citus truncate trigger" BEFORE DELETE ON chunks FOR EACH ROW '
                         "EXECUTE FUNCTION keep()")
        before, failures = pg.counts(), integrity_failures(vault)
        with pytest.raises(IntegrityError):
            vault.delete(ALICE, doomed)
        assert integrity_failures(vault) == failures + 1
        assert pg.counts() == before  # nothing reported deleted that remains
    with pytest.raises(IntegrityError, match="did not make"):
        Vault.open(pg.location, keyring_backend=keyring_backend, clock=clock)
