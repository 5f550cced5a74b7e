"""The keyring's epoch marks on a MemoryKeyring (keys/epochs/marks.py): only ever raised, each kind in its own
entry, a garbled entry read as none; and the cache of fetched keys (keys/keyring/cache.py):
bounded, expiring, oldest out first; the trial keyring ``keyring_backend="memory"`` names: one per process; and the
in-memory keyring's own promises (a read count from zero, a delete of nothing refused)."""

from __future__ import annotations

import pytest
from keyring.errors import PasswordDeleteError

from keys.epochs.marks import MARKER, PROBED, EpochMark, marker_name
from keys.errors import KeyUnavailable
from keys.keyring import memory
from keys.keyring.cache import KeyCache
from keys.keyring.edge import KeyringEdge, resolve_backend
from keys.testing import MemoryKeyring

SERVICE = "scratchvault/00/epoch-key"


class FailingKeyring(MemoryKeyring):
    def get_password(self, service: str, username: str) -> str | None:
        raise OSError("the keyring is gone")


def edge(ring: MemoryKeyring | None = None) -> KeyringEdge:
    return KeyringEdge(ring or MemoryKeyring(), timeout=5)


def test_an_epoch_mark_is_raised_never_lowered_and_kept_in_its_own_entry():
    ring = MemoryKeyring()
    destroyed, probed = EpochMark(edge(ring), SERVICE), EpochMark(edge(ring), SERVICE, PROBED)
    assert destroyed.read(3600) is None and not destroyed.covers(3600, 0)
    assert destroyed.raise_to(3600, 5) and destroyed.raise_to(3600, 3)
    assert destroyed.read(3600) == 5 and destroyed.covers(3600, 5) and not destroyed.covers(3600, 6)
    assert probed.read(3600) is None and destroyed.read(60) is None
    assert ring.secrets == {(SERVICE, marker_name(3600, MARKER)): "5"}
    assert marker_name(3600) == "3600.destroyed-through" and marker_name(3600, PROBED) == "3600.probed-through"


@pytest.mark.parametrize("text", ["", "-1", "05x", "9" * 20, str(2**63), "\u0661"])
def test_a_garbled_epoch_mark_reads_as_none(text):
    ring = MemoryKeyring()
    ring.secrets[(SERVICE, marker_name(3600))] = text
    assert EpochMark(edge(ring), SERVICE).read(3600) is None


def test_a_failing_keyring_covers_nothing_and_a_raise_reports_failure_without_raising():
    marks = EpochMark(edge(FailingKeyring()), SERVICE)
    assert not marks.covers(3600, 0) and not marks.raise_to(3600, 1)
    with pytest.raises(KeyUnavailable):
        marks.read(3600)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_cache_forgets_an_entry_at_its_lifetime_and_the_oldest_when_full():
    clock = Clock()
    cache: KeyCache[str] = KeyCache(2, 10.0, clock)
    cache.put("a", "A")
    clock.now = 5.0
    cache.put("b", "B")
    clock.now = 7.0
    cache.put("c", "C")  # full: "a" goes
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (None, "B", "C")
    clock.now = 15.0  # "b" reached its lifetime
    assert (cache.get("b"), cache.get("c"), len(cache)) == (None, "C", 1)
    cache.invalidate("c")
    assert len(cache) == 0


def test_a_cache_without_lifetime_or_room_keeps_nothing_and_clear_empties_it():
    for cache in (KeyCache[str](4, 0.0), KeyCache[str](0, 60.0), KeyCache[str](4, -1.0)):
        cache.put("a", "A")
        assert len(cache) == 0  # not even held until the next access sweeps it
        assert cache.get("a") is None
    cache = KeyCache[str](4, 60.0)
    cache.put("a", "A")
    cache.clear()
    assert cache.get("a") is None


def test_a_cache_of_one_entry_for_under_a_second_keeps_the_newest_for_that_long():
    clock = Clock()
    cache: KeyCache[str] = KeyCache(1, 0.5, clock)
    cache.put("a", "A")
    cache.put("b", "B")
    clock.now = 0.4
    assert (cache.get("a"), cache.get("b"), len(cache)) == (None, "B", 1)
    clock.now = 0.5
    assert (cache.get("b"), len(cache)) == (None, 0)


def test_the_trial_keyring_is_one_per_process(monkeypatch):
    monkeypatch.setattr(memory, "_trial", [])  # as in a process that has not used it yet
    first = resolve_backend("memory")
    assert resolve_backend("memory") is first
    assert isinstance(first, MemoryKeyring)


def test_the_in_memory_keyring_refuses_to_delete_an_absent_entry_as_keyring_does():
    with pytest.raises(PasswordDeleteError, match=r"^no such password$"):
        MemoryKeyring().delete_password("service", "user")


def test_the_in_memory_keyring_counts_each_read_from_zero_a_miss_included_a_write_not():
    ring = MemoryKeyring()
    assert ring.reads == 0  # the tests that count keyring round trips read this as an absolute number
    assert ring.get_password("service", "user") is None
    ring.set_password("service", "user", "secret")
    assert ring.get_password("service", "user") == "secret" and ring.reads == 2
