"""What doctor says of expiry epochs (vault/storage/epoch_report.py through storage.describe, on the store under test):
the live epoch keys, keys overdue once their epoch's end plus the skew allowance has passed and no gc ran, cleared by
gc; destroyed keys the keyring refused to delete, cleared by the gc that finally deletes them; and rows under no epoch
(a row of format 1 or 2: its wrapped data key is not the 65 bytes of format 3)."""

from __future__ import annotations

from keyring.backend import KeyringBackend

from keys.testing import MemoryKeyring
from tests.support.clock import FakeClock
from tests.support.fault_counts import FaultDouble, Switch
from vault import Principal, Vault, storage

ALICE, BOB = Principal("alice"), Principal("bob")
HOUR, SKEW = 3600, 300
T0 = 500_000 * HOUR + 100.0  # 100 s into an epoch


class RefusingKeyring(MemoryKeyring, FaultDouble):
    """A keyring whose deletes fail while ``refuse`` is set (a locked Secret Service), counting them."""

    refuse = Switch()

    def delete_password(self, service, username):
        if self.refuse:
            self.failed()
            raise OSError("the Secret Service is gone")
        super().delete_password(service, username)


KeyringBackend._classes.discard(RefusingKeyring)


def epoch_lines(location, now: float) -> list[tuple[str, str]]:
    return [(f.status, f.text) for f in storage.describe(location, now) if "expiry epoch" in f.text]


def summary(keys: int, no_epoch: int = 0) -> tuple[str, str]:
    return ("", f"expiry epochs with a key {keys:,}, rows under no expiry epoch {no_epoch:,}")


def overdue(past: int, unswept: int = 0) -> tuple[str, str]:
    return ("WARN", f"expiry epoch keys overdue: {past:,} past their end and the skew allowance (run gc), {unswept:,} "
                    "destroyed but not yet deleted from the keyring (gc retries), 0 malformed record(s)")


def test_doctor_lists_epoch_keys_overdue_once_their_end_and_the_skew_have_passed_and_gc_clears_them(db_path):
    clock = FakeClock(T0)
    with Vault.open(db_path, keyring_backend=MemoryKeyring(), clock=clock) as vault:
        vault.put(ALICE, "t", 1, "x", "first epoch", ttl_seconds=600)  # epoch 500,000
        vault.put(BOB, "t", 1, "x", "next epoch", ttl_seconds=HOUR + 600)  # epoch 500,001
        first_end = 500_001 * HOUR
        assert epoch_lines(db_path, T0) == [summary(2)]
        assert epoch_lines(db_path, first_end + SKEW - 1) == [summary(2)]  # within the skew allowance
        assert epoch_lines(db_path, first_end + SKEW) == [summary(2), overdue(1)]
        assert epoch_lines(db_path, first_end + HOUR + SKEW) == [summary(2), overdue(2)]
        clock.now = first_end + SKEW
        assert vault.gc() == 1
        assert epoch_lines(db_path, clock.now) == [summary(1)]
        assert epoch_lines(db_path, first_end + HOUR + SKEW) == [summary(1), overdue(1)]
        clock.now = first_end + HOUR + SKEW
        assert vault.gc() == 1
        assert epoch_lines(db_path, clock.now) == [summary(0)]


def test_doctor_lists_a_destroyed_key_the_keyring_refused_to_delete_until_a_gc_deletes_it(db_path):
    ring, clock = RefusingKeyring(), FakeClock(T0)
    with Vault.open(db_path, keyring_backend=ring, clock=clock) as vault:
        vault.put(ALICE, "t", 1, "x", "first epoch", ttl_seconds=600)
        clock.now = 500_001 * HOUR + SKEW
        ring.refuse = True
        vault.gc()  # the key is destroyed (tombstoned) whatever the keyring says; its entry stays
        assert any(service.endswith("/epoch-key") for service, _ in ring.secrets)
        assert epoch_lines(db_path, clock.now) == [summary(0), overdue(0, unswept=1)]
        ring.refuse = False
        vault.gc()
        assert not any(service.endswith("/epoch-key") and not user.endswith("-through")
                       for service, user in ring.secrets)
        assert epoch_lines(db_path, clock.now) == [summary(0)]


def test_doctor_counts_rows_under_no_epoch_by_their_wrapped_key(db_path, attacker):
    clock = FakeClock(T0)
    with Vault.open(db_path, keyring_backend=MemoryKeyring(), clock=clock) as vault:
        rows = [vault.put(ALICE, "t", n, "x", f"row {n}").id for n in range(3)]
    assert epoch_lines(db_path, T0) == [summary(1)]
    attacker.write(attacker.seq_of(rows[0]), "wrapped_key", bytes(60))  # as format 1 and 2 wrap a data key
    attacker.write(attacker.seq_of(rows[1]), "wrapped_key", bytes(64))
    found = epoch_lines(db_path, T0)
    assert found[0] == summary(1, no_epoch=2)
    assert found[1][0] == "WARN" and found[1][1].startswith("2 row(s) written before format 3")
