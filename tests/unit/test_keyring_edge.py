"""The keyring edge's writes and reads (keys/keyring/edge.py) on the in-memory keyring: a write is read back and
compared (keys/keyring/secret.py) before it counts as stored."""

from __future__ import annotations

from keys.keyring.edge import KeyringEdge
from keys.keyring.secret import Secret
from keys.testing import MemoryKeyring

LONE_SURROGATES = ("\ud800", "\udfff")  # text a backend can hand back that no UTF-8 encoder accepts as it is


def test_entries_that_are_not_valid_utf8_compare_without_raising_equal_only_to_the_same_text():
    high, low = LONE_SURROGATES
    assert Secret(high) == Secret(high) and Secret("k" + low) == Secret("k" + low)
    assert Secret(high) != Secret(low) and Secret("k") != Secret(low) and Secret(high) != Secret("k")


def test_an_entry_holding_a_lone_surrogate_is_written_and_read_back_as_kept():
    ring = MemoryKeyring()
    for text in LONE_SURROGATES:
        KeyringEdge(ring, timeout=5).set("service", "user", Secret(text))
        assert ring.secrets[("service", "user")] == text
