"""The README's example, end to end, on the in-memory keyring."""

import pytest

from vault import NotFound, Principal


def test_put_read_list_delete_round_trip(vault, alice, bob):
    rep = vault.put(alice, "turn-1", 1, "web.fetch", "line\n" * 10_000)
    assert rep.content_kind == "text" and rep.size_bytes == 50_000
    assert vault.read(alice, rep.id, mode="head", n=5).content == "line\n"
    assert [r.id for r in vault.list_for_turn(alice, "turn-1")] == [rep.id]
    with pytest.raises(NotFound):
        vault.read(bob, rep.id)
    vault.delete(alice, rep.id)
    assert vault.list_for_turn(alice, "turn-1") == []
    assert Principal("alice").user_id == "alice"
