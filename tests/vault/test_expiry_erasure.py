"""Expiry as crypto-erasure (threat_model.md, "Expiry epochs"), as whoever holds a copy of the database
tries it: a backup taken while rows lived, opened after their epoch ended and gc destroyed its key, with the owner
key present and the clock wound back to the copy's time; expiries on an epoch boundary and a second either side;
extend_turn moving rows into a later epoch, after which a copy taken before the move no longer opens them.

The clock is a fake: T0 (tests/support/clock.py) is the start of epoch 500,000 of the default one-hour length."""

from __future__ import annotations

import pytest

from tests.support.clock import T0
from tests.support.epochs import MARKER, SKEW, E, assert_nothing_of, epoch_entries, outcomes
from vault import NotFound, Vault

SHORT, LONG = "short-lived page: the dentist is on Tuesday. " * 40, "long-lived page: the plan stays. " * 40


def two_rows_then_a_copy(location, keyring, clock, attacker, backup, alice):
    """A short row (epoch 500,000) and a long one (epoch 500,002) of one owner and turn, then a copy of the
    database; the short one's epoch ends, plus the skew allowance, and gc runs. Returns (short id, long id)."""
    with Vault.open(location, keyring_backend=keyring, clock=clock) as vault:
        short = vault.put(alice, "t", 1, "tool", SHORT, ttl_seconds=600)
        long = vault.put(alice, "t", 2, "tool", LONG, ttl_seconds=2 * E + 60)
    attacker.copy_file(backup)  # the vault is closed: nothing of it is left only in the WAL
    clock.now = T0 + E + SKEW
    with Vault.open(location, keyring_backend=keyring, clock=clock) as vault:
        assert vault.gc() == 1 and vault.stats()["counters"]["integrity_failures"] == 0
    assert epoch_entries(keyring) == [f"{E}.{500_002}.1"]
    return short.id, long.id


def test_a_backup_opened_with_the_clock_wound_back_finds_the_row_not_found(db_path, keyring_backend, clock, attacker,
                                                                         attacker_for, location_named, alice):
    """The issue's wording: with the owner key present, the copy's short row is NotFound (as an expired row) and its
    summary not listed, by the clock and with the clock wound back to the copy's time, while the long row and its
    summary open; gc on the restored copy removes the short row without counting an integrity failure."""
    backup = location_named("backup.db")
    short, long = two_rows_then_a_copy(db_path, keyring_backend, clock, attacker, backup, alice)
    with Vault.open(backup, keyring_backend=keyring_backend, clock=clock) as copy:
        for moment in (clock.now, T0 + 1):  # by the clock, then wound back to the copy's time
            clock.now = moment
            assert [rep.id for rep in copy.list_for_turn(alice, "t")] == [long]
            assert copy.get(alice, long).content == LONG and copy.read(alice, long, mode="full").content == LONG
            assert outcomes(copy, alice, short) == {"get": NotFound, "read": NotFound, "list": None}
        assert copy.gc() == 0
        clock.now = T0 + E + SKEW + 1
        assert copy.gc() == 1 and copy.stats()["counters"]["integrity_failures"] == 0
        assert attacker_for(backup).row_ids() == {long}


def test_a_row_written_back_into_the_live_database_with_the_clock_wound_back_is_not_found(
        db_path, keyring_backend, clock, attacker, alice):
    """The same row put back by whoever can write the tables (the live database knows its epoch was destroyed)."""
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault:
        short = vault.put(alice, "t", 1, "tool", SHORT, ttl_seconds=600)
        long = vault.put(alice, "t", 2, "tool", LONG, ttl_seconds=2 * E + 60)
    saved = attacker.save_row(attacker.seq_of(short.id))
    clock.now = T0 + E + SKEW
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault:
        assert vault.gc() == 1
    attacker.restore_row(saved)
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault:
        for moment in (T0 + E + SKEW, T0 + 1):  # by the clock, then wound back
            clock.now = moment
            assert outcomes(vault, alice, short.id) == {"get": NotFound, "read": NotFound, "list": None}
            assert vault.get(alice, long.id).content == LONG
        clock.now = T0 + E + SKEW
        assert vault.gc() == 1 and vault.stats()["counters"]["integrity_failures"] == 0
    assert attacker.row_ids() == {long.id}


@pytest.mark.parametrize("offset", [-1, 0, 1])
def test_an_expiry_on_an_epoch_boundary_or_a_second_either_side_falls_in_the_right_epoch(vault, alice, clock,
                                                                                         keyring_backend, offset):
    """k*E - 1 is in epoch k - 1; k*E and k*E + 1 in epoch k (e = floor(t / E))."""
    vault.put(alice, "t", 1, "tool", "x", ttl_seconds=E + offset)
    assert epoch_entries(keyring_backend) == [f"{E}.{500_000 if offset < 0 else 500_001}.1"]


def test_destruction_at_the_end_plus_skew_takes_exactly_the_ended_epoch_from_a_backup(
        db_path, keyring_backend, clock, attacker, location_named, alice):
    """Rows expiring at k*E - 1, k*E and k*E + 1; a copy; gc at k*E + skew - 1 destroys no key, gc at k*E + skew
    destroys epoch k - 1 only: of the copy (clock wound back), the k*E - 1 row gives nothing, the other two open."""
    end = T0 + E  # k*E, k = 500,001
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault:
        ids = {offset: vault.put(alice, "t", offset + 2, "tool", f"row at {offset}: {MARKER}",
                                 ttl_seconds=E + offset).id for offset in (-1, 0, 1)}
    backup = location_named("backup.db")
    attacker.copy_file(backup)
    entries = epoch_entries(keyring_backend)
    assert entries == [f"{E}.500000.1", f"{E}.500001.1"]
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault:
        clock.now = end + SKEW - 1
        vault.gc()
        assert epoch_entries(keyring_backend) == entries
        clock.now = end + SKEW
        vault.gc()
        assert epoch_entries(keyring_backend) == [f"{E}.500001.1"]
    clock.now = end - 0.5  # the k*E - 1 row expired by the clock, the other two not
    with Vault.open(backup, keyring_backend=keyring_backend, clock=clock) as copy:
        assert sorted(rep.id for rep in copy.list_for_turn(alice, "t")) == sorted([ids[0], ids[1]])
        clock.now = T0 + 1
        assert_nothing_of(copy, alice, ids[-1], marker="row at -1")
        for offset in (0, 1):
            assert copy.get(alice, ids[offset]).content == f"row at {offset}: {MARKER}"
