"""Expiry as erasure for a backup opened with the clock wound back: a backup taken while two rows of one turn lived,
opened after the shorter one's epoch ended and gc destroyed its key, every owner key still in the keyring. The
shorter row must not open (NotFound, as an expired row), the longer one must, and the turn's listing must show the
longer one alone. Both store kinds (location_named: a file beside db_path, or a PostgreSQL schema)."""

from __future__ import annotations

import pytest

from keys.testing import MemoryKeyring
from tests.support.clock import FakeClock
from vault import KeyUnavailable, NotFound, Principal, Vault, storage

ALICE = Principal("alice")
T0, HOUR, SKEW = 1_800_000_000.0, 3600, 300


def backup_after_destruction(db_path, location_named) -> tuple[MemoryKeyring, object, str, str]:
    """(keyring, backup location, short row id, long row id): the backup made while both rows lived, the live
    vault gc'd once the short row's epoch ended (+ skew)."""
    ring, clock = MemoryKeyring(), FakeClock(T0)
    with Vault.open(db_path, keyring_backend=ring, clock=clock) as vault:
        short = vault.put(ALICE, "t", 1, "x", "short lived", ttl_seconds=600).id
        long = vault.put(ALICE, "t", 2, "x", "long lived", ttl_seconds=2 * 86400).id
        copy = location_named("backup.db")
        storage.backup(db_path, copy)
        clock.now = (int(T0 + 600) // HOUR + 1) * HOUR + SKEW
        assert vault.gc() == 1
    assert any(service.endswith("/owner-key") for service, _ in ring.secrets)
    return ring, copy, short, long


def test_a_backup_with_the_clock_by_the_copy_never_opens_the_row_whose_epoch_key_is_gone(db_path, location_named):
    ring, copy, short, long = backup_after_destruction(db_path, location_named)
    with Vault.open(copy, keyring_backend=ring, clock=FakeClock(T0 + 1)) as vault:
        with pytest.raises((NotFound, KeyUnavailable)):  # never its content; NotFound is meant (below)
            vault.get(ALICE, short)
        assert vault.get(ALICE, long).content == "long lived"


def test_a_backup_with_the_clock_wound_back_says_not_found_for_the_row_whose_epoch_key_is_gone(
        db_path, location_named):
    ring, copy, short, _ = backup_after_destruction(db_path, location_named)
    with Vault.open(copy, keyring_backend=ring, clock=FakeClock(T0 + 1)) as vault, pytest.raises(NotFound):
        vault.get(ALICE, short)


def test_a_backup_with_the_clock_wound_back_lists_the_longer_lived_row_alone(db_path, location_named):
    ring, copy, _, long = backup_after_destruction(db_path, location_named)
    with Vault.open(copy, keyring_backend=ring, clock=FakeClock(T0 + 1)) as vault:
        assert [(r.id, r.summary) for r in vault.list_for_turn(ALICE, "t")] == [(long, "text, 10 chars: long lived")]
