"""Refresh on read (``Scratchpad(..., refresh_on_read=True)``, off by default): each successful
``scratchpad_read`` makes the row live at least ``ttl_seconds`` more from the read, never shortening it and never
more than the vault's maximum lifetime from now; a read that is refused refreshes nothing."""

from __future__ import annotations

import pytest

from vault import InvalidArgument, NotFound
from vault.engine import NOT_FOUND, Scratchpad

TEXT = "a page worth keeping " * 400


def read(pad: Scratchpad, who, row: str) -> dict:
    return pad.call_tool(who, "t1", {"id": row, "n": 6})


def test_by_default_a_row_read_at_55_seconds_expires_at_60(vault, clock, alice):
    pad = Scratchpad(vault, ttl_seconds=60)
    row = pad.observe(alice, "t1", 1, "fetch", TEXT)["id"]
    clock.advance(55)
    assert read(pad, alice, row)["content"] == TEXT[:6]
    clock.advance(6)
    assert read(pad, alice, row) == NOT_FOUND


def test_with_refresh_each_read_gives_the_row_another_ttl_from_the_read(vault, clock, alice):
    pad = Scratchpad(vault, ttl_seconds=60, refresh_on_read=True)
    row = pad.observe(alice, "t1", 1, "fetch", TEXT)["id"]
    clock.advance(55)
    assert read(pad, alice, row)["content"] == TEXT[:6]  # now lives until 55 + 60
    clock.advance(59)
    assert read(pad, alice, row)["content"] == TEXT[:6]  # at 114: lives until 174
    clock.advance(61)
    assert read(pad, alice, row) == NOT_FOUND  # not read for 61 seconds


def test_refresh_never_shortens_a_longer_lifetime(vault, clock, alice):
    pad = Scratchpad(vault, ttl_seconds=60, refresh_on_read=True)
    row = pad.observe(alice, "t1", 1, "fetch", TEXT, ttl_seconds=3600)["id"]
    assert read(pad, alice, row)["content"] == TEXT[:6]
    clock.advance(3599)
    assert vault.read(alice, row, n=6).content == TEXT[:6]


def test_a_refused_read_refreshes_nothing(vault, clock, alice, bob):
    pad = Scratchpad(vault, ttl_seconds=60, refresh_on_read=True)
    row = pad.observe(alice, "t1", 1, "fetch", TEXT)["id"]
    pad.observe(bob, "t1", 1, "fetch", TEXT)
    clock.advance(55)
    assert read(pad, bob, row) == NOT_FOUND  # bob's read of alice's row
    assert pad.call_tool(alice, "t2", {"id": row}) == NOT_FOUND  # alice's, from another turn
    clock.advance(6)
    assert read(pad, alice, row) == NOT_FOUND


def test_the_refresh_is_bounded_by_the_vaults_maximum_lifetime(vault_dir, keyring_backend, clock, alice):
    from vault import Vault
    with Vault.open(vault_dir / "short.db", keyring_backend=keyring_backend, clock=clock, max_ttl_seconds=90) as v:
        with pytest.raises(InvalidArgument, match="at most 90 seconds"):
            Scratchpad(v, ttl_seconds=91, refresh_on_read=True)
        pad = Scratchpad(v, ttl_seconds=90, refresh_on_read=True)
        row = pad.observe(alice, "t1", 1, "fetch", TEXT)["id"]
        clock.advance(80)
        assert read(pad, alice, row)["content"] == TEXT[:6]
        clock.advance(89)
        assert read(pad, alice, row)["content"] == TEXT[:6]  # refreshed at 80 until 170, at 169 until 259
        clock.advance(90)
        assert read(pad, alice, row) == NOT_FOUND  # lived 90 seconds from the last read, not more


def test_refresh_on_read_must_be_a_bool(vault):
    with pytest.raises(InvalidArgument, match="refresh_on_read"):
        Scratchpad(vault, refresh_on_read="yes")


def test_extending_one_row_is_checked_like_a_read(vault, clock, alice, bob):
    row = vault.put(alice, "t1", 1, "fetch", TEXT, ttl_seconds=60).id
    for who, which in ((bob, row), (alice, "not-an-id"), (alice, "0" * 32)):
        with pytest.raises(NotFound):
            vault.extend(who, which, 600)
    clock.advance(61)
    with pytest.raises(NotFound):
        vault.extend(alice, row, 600)  # expired: never brought back
