"""Per-owner quotas and the disk reserve through the public API, on the test's own file system (the small file
system that really fills up is tests/system/test_full_disk.py). A refused put is a QuotaExceeded that names no
one, with nothing stored: no row, no chunk, no first key for a new owner; other owners go on putting. Quotas
count stored rows and bytes, expired ones until gc collects them, and hold under racing threads (they are checked
under the write lock)."""

from __future__ import annotations

import io
import threading

import pytest

from keys.testing import MemoryKeyring
from vault import InvalidArgument, Principal, QuotaExceeded, StorageError, Vault

ALICE, BOB = Principal("alice-7f3e"), Principal("bob")


def opened(db_path, keyring_backend, clock, **settings) -> Vault:
    return Vault.open(db_path, keyring_backend=keyring_backend, clock=clock, **settings)


def test_the_row_quota_refuses_one_owner_with_nothing_stored_while_another_still_puts(db_path, keyring_backend,
                                                                                      clock, attacker):
    with opened(db_path, keyring_backend, clock, owner_max_rows=3) as vault:
        kept = [vault.put(ALICE, "t", step, "x", f"row {step}").id for step in range(3)]
        before = attacker.counts()
        with pytest.raises(QuotaExceeded, match="quota of 3 stored rows") as refused:
            vault.put(ALICE, "t", 3, "x", "one too many")
        assert isinstance(refused.value, StorageError) and "alice" not in str(refused.value)
        assert attacker.counts() == before
        for step in range(3):
            vault.put(BOB, "t", step, "x", "bob has a quota of his own")
        vault.delete(ALICE, kept[0])
        vault.put(ALICE, "t", 3, "x", "room again after a delete")


def test_expired_rows_count_until_gc_collects_them(db_path, keyring_backend, clock):
    with opened(db_path, keyring_backend, clock, owner_max_rows=2, owner_max_bytes=10) as vault:
        vault.put(ALICE, "t", 1, "x", "12345", ttl_seconds=10)
        vault.put(ALICE, "t", 2, "x", "12345", ttl_seconds=10)
        clock.advance(20)
        with pytest.raises(QuotaExceeded, match="until gc removes them"):
            vault.put(ALICE, "t", 3, "x", "1")
        assert vault.gc() == 2
        vault.put(ALICE, "t", 3, "x", "1234567890")


def test_the_byte_quota_is_exact_and_stops_a_stream_before_its_end(db_path, keyring_backend, clock, attacker):
    limit = 300_000
    with opened(db_path, keyring_backend, clock, owner_max_bytes=limit) as vault:
        vault.put(ALICE, "t", 1, "x", b"a" * 100_000)
        before = attacker.counts()
        stream = io.BytesIO(b"s" * 5_000_000)
        with pytest.raises(QuotaExceeded, match="quota of 300,000 stored bytes"):
            vault.put(ALICE, "t", 2, "x", stream)
        assert stream.tell() < 1_000_000 and attacker.counts() == before
        with pytest.raises(QuotaExceeded):
            vault.put(ALICE, "t", 2, "x", "é" * 100_001)  # 200,002 bytes of UTF-8: two past the limit
        assert attacker.counts() == before
        vault.put(ALICE, "t", 2, "x", "é" * 100_000)  # exactly at it
        vault.put(BOB, "t", 1, "x", b"b" * limit)
        assert vault.stats()["bytes"] == 2 * limit


def test_racing_puts_of_one_owner_never_pass_the_row_quota(db_path, keyring_backend, clock):
    with opened(db_path, keyring_backend, clock, owner_max_rows=10) as vault:
        vault.put(ALICE, "t", 0, "x", "first: the owner's key exists before the race")
        outcomes: list[str] = []
        lock = threading.Lock()

        def writer(worker: int) -> None:
            for step in range(5):
                try:
                    vault.put(ALICE, "t", worker * 10 + step, "x", "racing")
                    outcome = "stored"
                except QuotaExceeded:
                    outcome = "refused"
                with lock:
                    outcomes.append(outcome)

        threads = [threading.Thread(target=writer, args=(worker,)) for worker in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert outcomes.count("stored") == 9 and outcomes.count("refused") == 21
        assert vault.stats()["rows"] == 10


@pytest.mark.sqlite_only("the disk reserve and ballast are the SQLite store's; a PostgreSQL server keeps its own disk")
def test_a_put_past_the_disk_reserve_stores_nothing_and_makes_no_key_for_a_new_owner(db_path, clock, attacker):
    ring = MemoryKeyring()
    with opened(db_path, ring, clock) as vault:
        free = vault.stats()["disk"]["free_bytes"]
    keys_before = dict(ring.secrets)  # the index key only
    with opened(db_path, ring, clock, disk_reserve_bytes=free + (1 << 40)) as vault:
        with pytest.raises(QuotaExceeded, match="disk reserve") as refused:
            vault.put(ALICE, "t", 1, "x", "never stored")
        assert "alice" not in str(refused.value)
        assert attacker.counts() == (0, 0, 0) and attacker.commitments() == [] and ring.secrets == keys_before
        assert vault.stats()["disk"]["ballast_bytes"] == 0  # nothing written for a put that was refused


@pytest.mark.sqlite_only("the disk reserve and ballast are the SQLite store's; a PostgreSQL server keeps its own disk")
def test_stats_show_the_reserve_free_space_ballast_and_quotas(db_path, keyring_backend, clock):
    with opened(db_path, keyring_backend, clock) as vault:
        vault.put(ALICE, "t", 1, "x", "makes the ballast")
        stats = vault.stats()
    disk = stats["disk"]
    assert disk["reserve_bytes"] == max(64 << 20, disk["file_system_bytes"] // 100)  # the default
    assert 0 < disk["free_bytes"] <= disk["file_system_bytes"] and disk["ballast_bytes"] == 1 << 20
    assert stats["quotas"] == {"owner_max_rows": None, "owner_max_bytes": None}
    with opened(db_path, keyring_backend, clock, disk_reserve_bytes=0, owner_max_rows=5,
                owner_max_bytes=6) as vault:
        stats = vault.stats()
    assert stats["disk"]["reserve_bytes"] == 0 and stats["quotas"] == {"owner_max_rows": 5, "owner_max_bytes": 6}


@pytest.mark.parametrize(("setting", "value"), [
    ("disk_reserve_bytes", -1), ("disk_reserve_bytes", 1.5), ("disk_reserve_bytes", True),
    ("disk_reserve_bytes", "64M"), ("owner_max_rows", 0), ("owner_max_rows", -3), ("owner_max_rows", False),
    ("owner_max_bytes", 0), ("owner_max_bytes", 2.0), ("owner_max_bytes", 2**63)])
def test_bad_settings_are_refused_before_anything_is_made(vault_dir, keyring_backend, setting, value):
    with pytest.raises(InvalidArgument, match=setting):
        Vault.open(vault_dir / "s.db", keyring_backend=keyring_backend, **{setting: value})
    assert list(vault_dir.iterdir()) == []


def test_an_owners_ledger_of_deleted_rows_counts_against_their_byte_quota(db_path, keyring_backend, clock):
    """An owner under a quota who puts and deletes rows in a loop grows their ledger of deleted rows (24 bytes a
    delete, kept max_ttl_seconds); the ledger counts as their bytes, so the loop cannot pass the quota."""
    with opened(db_path, keyring_backend, clock, owner_max_bytes=1_000) as vault:
        refused_at = None
        for cycle in range(100):
            try:
                vault.delete(ALICE, vault.put(ALICE, "t", cycle, "x", "0123456789").id)
            except QuotaExceeded:
                refused_at = cycle
                break
        assert refused_at is not None and 35 <= refused_at <= 45  # about 1,000 / 24 deletes
        assert vault.stats()["rows"] == 0
        assert vault.put(BOB, "t", 1, "x", "another owner still puts").size_bytes > 0
