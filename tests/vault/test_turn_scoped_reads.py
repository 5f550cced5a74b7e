"""Turn-scoped reads and has_rows: a row of another turn is the same NotFound, decided before decryption."""

from __future__ import annotations

import pytest

from vault import NotFound


def test_read_and_get_scoped_to_a_turn_refuse_rows_of_other_turns_alike(vault, alice, bob, monkeypatch):
    here = vault.put(alice, "turn-1", 1, "x", "in turn one")
    there = vault.put(alice, "turn-2", 1, "x", "in turn two")
    bobs = vault.put(bob, "turn-1", 1, "x", "bob's")
    assert vault.read(alice, here.id, turn_id="turn-1").content == "in turn one"
    assert vault.get(alice, here.id, turn_id="turn-1").content == "in turn one"
    opened = []
    monkeypatch.setattr(vault._keys, "owner_keyset", lambda *a, **k: opened.append(a) or None)
    errors = []
    for row_id in (there.id, bobs.id, "f" * 32, "nonsense"):
        for call in (lambda r: vault.read(alice, r, turn_id="turn-1"), lambda r: vault.get(alice, r, turn_id="turn-1")):
            with pytest.raises(NotFound) as caught:
                call(row_id)
            errors.append((type(caught.value), str(caught.value)))
    assert len(set(errors)) == 1
    assert opened == []  # no key was even fetched: the turn is checked with the owner, before decryption


def test_has_rows_sees_only_the_callers_unexpired_rows_of_that_turn(vault, alice, bob, clock):
    assert not vault.has_rows(alice, "t")
    vault.put(alice, "t", 1, "x", "soon gone", ttl_seconds=10)
    assert vault.has_rows(alice, "t")
    assert not vault.has_rows(bob, "t") and not vault.has_rows(alice, "other")
    clock.advance(10)
    assert not vault.has_rows(alice, "t")
