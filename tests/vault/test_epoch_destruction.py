"""Destroying the keys of ended expiry epochs (threat_model.md, "Expiry epochs") under faults: a keyring
that refuses the delete (gc still removes the rows and returns; doctor names the undeleted key; the next gc with a
working keyring finishes), a host whose clock is behind putting into an epoch another host already destroyed (refused,
nothing stored), and the number of epoch keys the keyring holds at steady state."""

from __future__ import annotations

import math

import pytest

from tests.keys.test_key_faults import FaultyKeyring
from tests.support.clock import T0, FakeClock
from tests.support.epochs import SKEW, E, assert_nothing_of, epoch_entries
from vault import KeyUnavailable, Vault
from vault.ops.doctor import diagnose

UNDELETED = "1 destroyed but not yet deleted from the keyring"


def epoch_lines(location) -> list[str]:
    return [line for line in diagnose(location)[0] if "expiry epoch" in line]


def test_a_keyring_that_refuses_the_delete_leaves_gc_done_and_doctor_naming_the_key_until_the_next_gc(
        db_path, keyring_backend, clock, attacker, alice):
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault:
        short = vault.put(alice, "t", 1, "tool", "short: the dentist is on Tuesday", ttl_seconds=600)
        long = vault.put(alice, "t", 2, "tool", "long", ttl_seconds=2 * E)
    clock.now = T0 + E + SKEW
    refusing = FaultyKeyring(keyring_backend.secrets, {"delete"})
    with Vault.open(db_path, keyring_backend=refusing, clock=clock) as vault:
        assert vault.gc() == 1 and vault.stats()["counters"]["integrity_failures"] == 0
        assert epoch_entries(keyring_backend) == [f"{E}.500000.1", f"{E}.500002.1"]  # the delete was refused
        assert attacker.row_ids() == {long.id} and vault.get(alice, long.id).content == "long"
        clock.now = T0 + 1  # the epoch is closed in the database: its key, still in the keyring, is never used
        assert_nothing_of(vault, alice, short.id, marker="dentist")
    assert any(UNDELETED in line and line.startswith("WARN") for line in epoch_lines(db_path)), epoch_lines(db_path)
    clock.now = T0 + E + SKEW + 60
    with Vault.open(db_path, keyring_backend=refusing, clock=clock) as vault:
        assert vault.gc() == 0  # refused again: still pending, gc still returns
    assert any(UNDELETED in line for line in epoch_lines(db_path))
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault:
        assert vault.gc() == 0 and vault.stats()["counters"]["integrity_failures"] == 0
        assert vault.get(alice, long.id).content == "long"
    assert epoch_entries(keyring_backend) == [f"{E}.500002.1"]
    assert not any(line.startswith("WARN") for line in epoch_lines(db_path)), epoch_lines(db_path)


def two_hosts(db_path, keyring):
    """Two hosts on one database and keyring, each with its own clock (both at T0 at first) and key caches.
    Returns (A, B, A's clock, B's clock)."""
    clock_a, clock_b = FakeClock(), FakeClock()
    host_a = Vault.open(db_path, keyring_backend=keyring, clock=clock_a)
    host_b = Vault.open(db_path, keyring_backend=keyring, clock=clock_b)
    return host_a, host_b, clock_a, clock_b


@pytest.mark.parametrize("cached", [True, False], ids=["key-cached", "key-not-cached"])
def test_a_put_from_a_host_behind_by_more_than_the_allowance_into_a_destroyed_epoch_stores_nothing(
        db_path, keyring_backend, attacker, alice, cached, request):
    """B (accurate) destroys epoch 500,000 at its end + skew; A, SKEW + 10 s behind, puts a row expiring in it:
    KeyUnavailable, nothing stored (rows, the tables and the keyring as before), never wrapped under that key."""
    host_a, host_b, clock_a, clock_b = two_hosts(db_path, keyring_backend)
    with host_a, host_b, Vault.open(db_path, keyring_backend=keyring_backend, clock=clock_a) as fresh_a:
        host_a.put(alice, "t", 1, "tool", "cached", ttl_seconds=60)  # A holds epoch 500,000's key cached
        writer = host_a if cached else fresh_a  # fresh_a (another process of host A) never loaded it
        clock_b.now = T0 + E + SKEW
        host_b.gc()
        assert epoch_entries(keyring_backend) == []
        rows, stored, entries = writer.stats()["rows"], attacker.rows(), dict(keyring_backend.secrets)
        clock_a.now = clock_b.now - SKEW - 10  # T0 + E - 10: epoch 500,000 has 10 s left by A's clock
        with pytest.raises(KeyUnavailable, match="clock is behind"):
            writer.put(alice, "t", 2, "tool", "late: the dentist is on Tuesday", ttl_seconds=5)
        assert writer.stats()["rows"] == rows and attacker.rows() == stored
        assert keyring_backend.secrets == entries
        assert writer.put(alice, "t", 3, "tool", "later", ttl_seconds=20).expires_at == T0 + E + 10  # epoch 500,001


def test_within_the_allowance_gc_destroys_nothing_a_host_behind_still_writes_to(db_path, keyring_backend, alice):
    """A is SKEW - 0.5 s behind B: B's gc at epoch 500,000's end + SKEW - 1 destroys no key (it removes the rows
    expired by its clock), and A still puts into epoch 500,000 in its last second and reads the row; B's gc at the
    end + SKEW destroys the key."""
    host_a, host_b, clock_a, clock_b = two_hosts(db_path, keyring_backend)
    with host_a, host_b:
        host_a.put(alice, "t", 1, "tool", "first", ttl_seconds=60)
        clock_b.now = T0 + E + SKEW - 1
        clock_a.now = clock_b.now - (SKEW - 0.5)  # T0 + E - 0.5
        assert host_b.gc() == 1 and epoch_entries(keyring_backend) == [f"{E}.500000.1"]
        late = host_a.put(alice, "t", 2, "tool", "last second", ttl_seconds=0.25)
        assert epoch_entries(keyring_backend) == [f"{E}.500000.1"]
        assert host_a.get(alice, late.id).content == "last second"
        assert [rep.id for rep in host_a.list_for_turn(alice, "t")] == [late.id]
        clock_b.now = T0 + E + SKEW
        assert host_b.gc() == 1 and epoch_entries(keyring_backend) == []


def test_at_steady_state_with_hour_long_rows_the_keyring_holds_at_most_three_epoch_keys(vault, alice, clock,
                                                                                       keyring_backend):
    """Defaults (one-hour epochs, 5 min skew): a put every 5 simulated minutes with ttl 1 h, gc every hour, for 6
    hours, plus two rows of 30 days: at most 3 keys for the hour-long rows (the epoch that just ended, the current
    one and the next) besides the two; all gone once every row's epoch has ended."""
    counts = []
    for minute in range(0, 6 * 60, 5):
        clock.now = T0 + 60 * minute
        if minute % 60 == 0:
            vault.gc()
        vault.put(alice, "t", minute, "tool", f"minute {minute}", ttl_seconds=E)
        if minute in (30, 200):
            vault.put(alice, "long", minute, "tool", "a month", ttl_seconds=30 * 86400)
        counts.append(len(epoch_entries(keyring_backend)) - (minute >= 30) - (minute >= 200))
    assert max(counts) == 3 and counts[-1] == 3, counts
    clock.now = T0 + 30 * 86400 + 200 * 60 + E + SKEW
    vault.gc()
    assert epoch_entries(keyring_backend) == [] and vault.stats()["rows"] == 0


def test_at_steady_state_with_month_long_rows_the_keyring_holds_lifetime_over_length_plus_one(db_path, alice,
                                                                                            keyring_backend):
    """One-day epochs (the longest allowed) and 30-day rows put every 6 simulated hours, gc daily, for 40 days:
    after each gc, at most ceil(30 days / 1 day) + 1 = 31 keys (the epochs live rows expire in); between an epoch's
    end and the gc after its skew allowance, that epoch's key besides: never more than 32."""
    clock, length = FakeClock(), 86400
    bound = math.ceil(30 * 86400 / length) + 1
    after_gc, counts = [], []
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock, epoch_seconds=length) as vault:
        for quarter in range(40 * 4):
            clock.now = T0 + quarter * 6 * 3600
            if quarter % 4 == 1:
                vault.gc()
                after_gc.append(len(epoch_entries(keyring_backend)))
            vault.put(alice, "t", quarter, "tool", "x", ttl_seconds=30 * 86400)
            counts.append(len(epoch_entries(keyring_backend)))
    assert max(after_gc) == bound and max(counts) == bound + 1, (after_gc, counts)
