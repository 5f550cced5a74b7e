"""Expiry against the injected clock: readable until expires_at, NotFound from then on, gc sweeps exactly that."""

from __future__ import annotations

import math

import pytest

from tests.support.clock import T0
from vault import InvalidArgument, NotFound, Vault


def just_before(moment: float) -> float:
    return math.nextafter(moment, -math.inf)


def not_found_message(call) -> str:
    with pytest.raises(NotFound) as caught:
        call()
    assert caught.type is NotFound
    return str(caught.value)


def assert_gone(vault, who, rid, turn="t"):
    for call in (lambda: vault.get(who, rid), lambda: vault.read(who, rid, mode="full"),
                 lambda: vault.delete(who, rid)):
        assert not_found_message(call) == NotFound.MESSAGE
    assert rid not in [rep.id for rep in vault.list_for_turn(who, turn)]


def test_row_is_readable_until_the_last_instant_before_expiry(vault, alice, clock):
    rep = vault.put(alice, "t", 1, "tool", "short-lived", ttl_seconds=10)
    assert rep.expires_at == T0 + 10
    clock.now = just_before(rep.expires_at)
    assert vault.get(alice, rep.id).content == "short-lived"
    assert vault.read(alice, rep.id, mode="full").content == "short-lived"
    assert [r.id for r in vault.list_for_turn(alice, "t")] == [rep.id]


@pytest.mark.parametrize("after", [0, 1e-6, 1, 10**6])
def test_row_is_not_found_exactly_at_and_after_expiry_before_any_gc(vault, alice, clock, after):
    rep = vault.put(alice, "t", 1, "tool", "short-lived", ttl_seconds=10)
    clock.now = rep.expires_at + after
    assert_gone(vault, alice, rep.id)
    assert vault.stats()["rows"] == 1 and vault.stats()["expired_rows"] == 1  # still stored: gc has not run


def test_expired_not_found_is_indistinguishable_from_missing_and_foreign(vault, alice, bob, clock):
    expired = vault.put(alice, "t", 1, "tool", "old", ttl_seconds=5).id
    foreign = vault.put(bob, "t", 1, "tool", "bob's").id
    clock.advance(5)
    never = "0" * 32
    for call in (vault.get, vault.read, vault.delete):
        messages = {not_found_message(lambda rid=rid: call(alice, rid)) for rid in (expired, foreign, never, "junk")}
        assert messages == {NotFound.MESSAGE}


def test_default_ttl_is_one_hour(vault, alice, clock):
    rep = vault.put(alice, "t", 1, "tool", "x")
    assert rep.expires_at - rep.created_at == 3600 and rep.created_at == T0
    clock.advance(3599.5)
    assert vault.get(alice, rep.id).content == "x"
    clock.advance(0.5)
    assert_gone(vault, alice, rep.id)


def test_gc_removes_exactly_the_expired_rows_and_returns_the_count(vault, alice, bob, clock):
    short = [vault.put(who, "t", i, "tool", f"short {i}", ttl_seconds=10) for i, who in enumerate((alice, bob))]
    edge = vault.put(alice, "t", 5, "tool", "expires at 20", ttl_seconds=20)
    live = vault.put(alice, "t", 9, "tool", "long", ttl_seconds=100)
    assert vault.gc(T0 + 5) == 0 and vault.gc(just_before(edge.expires_at)) == 2
    assert vault.stats()["rows"] == 2
    assert vault.gc(edge.expires_at) == 1 and vault.gc(edge.expires_at) == 0
    assert vault.stats()["rows"] == 1
    assert vault.get(alice, live.id).content == "long"  # the clock (T0) never moved: only gc's `now` did
    for rep, who in ((short[0], alice), (short[1], bob), (edge, alice)):
        assert_gone(vault, who, rep.id)
    assert [r.id for r in vault.list_for_turn(alice, "t")] == [live.id]


def test_gc_without_argument_uses_the_clock(vault, alice, clock):
    old = vault.put(alice, "t", 1, "tool", "old", ttl_seconds=10)
    new = vault.put(alice, "t", 2, "tool", "new", ttl_seconds=60)
    assert vault.gc() == 0
    clock.advance(10)
    assert vault.gc() == 1
    assert vault.stats()["rows"] == 1 and vault.get(alice, new.id).content == "new"
    assert_gone(vault, alice, old.id)


def test_gc_is_final_even_if_the_clock_goes_back(vault, alice, clock):
    rep = vault.put(alice, "t", 1, "tool", "x", ttl_seconds=10)
    clock.advance(10)
    assert vault.gc() == 1
    clock.now = T0
    assert_gone(vault, alice, rep.id)
    assert vault.stats()["rows"] == 0


def test_stats_counts_expired_rows_against_the_clock(vault, alice, bob, clock):
    for i, ttl in enumerate((10, 20, 30)):
        vault.put(alice if i % 2 else bob, "t", i, "tool", "x" * (i + 1), ttl_seconds=ttl)
    expected = {0: 0, 10: 1, 19.999: 1, 20: 2, 30: 3, 10_000: 3}
    for offset, count in expected.items():
        clock.now = T0 + offset
        stats = vault.stats()
        assert (stats["rows"], stats["bytes"], stats["expired_rows"]) == (3, 6, count), offset


def test_expiry_is_evaluated_against_the_clock_at_each_access(vault, alice, clock):
    """Expiry is by the injected clock, at access time; an access to an expired row deletes nothing."""
    rep = vault.put(alice, "t", 1, "tool", "back again", ttl_seconds=10)
    clock.advance(15)
    assert_gone(vault, alice, rep.id)
    clock.now = T0 + 5  # the clock went backwards (NTP step, restored snapshot): the row is live again
    assert vault.get(alice, rep.id).content == "back again"
    assert [r.id for r in vault.list_for_turn(alice, "t")] == [rep.id]
    assert vault.stats()["expired_rows"] == 0


def test_reads_of_expired_rows_count_as_denied(vault, alice, clock):
    rep = vault.put(alice, "t", 1, "tool", "x", ttl_seconds=1)
    denied = vault.stats()["counters"]["denied"]
    clock.advance(1)
    with pytest.raises(NotFound):
        vault.read(alice, rep.id)
    assert vault.stats()["counters"]["denied"] == denied + 1


def test_gc_rejects_a_non_finite_or_non_numeric_now(vault, alice):
    vault.put(alice, "t", 1, "tool", "x")
    for now in (float("nan"), float("inf"), float("-inf"), True, "1e12", [1]):
        with pytest.raises(InvalidArgument):
            vault.gc(now)
    assert vault.stats()["rows"] == 1


def test_clock_returning_garbage_fails_with_invalid_argument_and_stores_nothing(vault_dir, keyring_backend, alice):
    for bad in (float("nan"), float("inf"), "now", None):
        with Vault.open(vault_dir / "c.db", keyring_backend=keyring_backend, clock=lambda bad=bad: bad) as broken:
            for call in (lambda: broken.put(alice, "t", 1, "tool", "x"), broken.gc, broken.stats,
                         lambda: broken.list_for_turn(alice, "t")):
                with pytest.raises(InvalidArgument):
                    call()
    with Vault.open(vault_dir / "c.db", keyring_backend=keyring_backend, clock=lambda: T0) as sane:
        assert sane.stats()["rows"] == 0


def test_smallest_accepted_ttl_gives_a_row_readable_at_creation(vault, alice):
    try:
        rep = vault.put(alice, "t", 1, "tool", "blink", ttl_seconds=1e-9)
    except InvalidArgument:
        assert vault.stats()["rows"] == 0
        return
    assert vault.get(alice, rep.id).content == "blink"
    assert rep.expires_at > rep.created_at



def test_a_row_put_after_gc_never_resurrects_the_collected_one(vault, alice, clock):
    old = vault.put(alice, "t", 1, "tool", "old content", ttl_seconds=10)
    clock.advance(10)
    assert vault.gc() == 1
    new = vault.put(alice, "t", 2, "tool", "new", ttl_seconds=10)  # may reuse the collected row's storage slot
    assert new.id != old.id
    assert_gone(vault, alice, old.id)
    assert vault.get(alice, new.id).content == "new" and vault.read(alice, new.id, mode="full").content == "new"
    assert [r.id for r in vault.list_for_turn(alice, "t")] == [new.id]
    assert (vault.stats()["rows"], vault.stats()["bytes"]) == (1, 3)
