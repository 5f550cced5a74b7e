"""A writer of the database plants a constraint or index on the key bookkeeping while the vault runs: a unique index
that makes a tombstone's insert a silent no-op, a foreign key whose ON DELETE CASCADE removes a tombstone in the
statement that drops its commitment. A retirement, shred or gc must then either destroy the keys it reports
destroyed or refuse with IntegrityError; never report success with a key left in the keyring. The schema is compared
with exactly what the vault made, so doctor names the planted object too. Both stores (the foreign keys on
PostgreSQL only: the SQLite file is opened with foreign keys off, so a planted one does nothing there)."""

from __future__ import annotations

import contextlib

import pytest

from keys.testing import MemoryKeyring
from tests.attacks.stores import STORE
from tests.support.clock import T0, FakeClock
from tests.support.epochs import SKEW, E, epoch_entries
from tests.support.keyring_entries import owner_key_entries
from vault import IntegrityError, Principal, Vault, VaultError
from vault.storage import describe

ALICE = Principal("alice")
UNIQUE_TOMBSTONE = "CREATE UNIQUE INDEX planted ON key_tombstones (owner_tag)"
CASCADE_TOMBSTONE = ("ALTER TABLE key_tombstones ADD CONSTRAINT planted FOREIGN KEY (owner_tag, version) "
                     "REFERENCES owner_keys (owner_tag, version) ON DELETE CASCADE NOT VALID")
OWNER_PLANTS = {"unique index": (UNIQUE_TOMBSTONE, "DROP INDEX planted")}
if STORE == "postgres":
    OWNER_PLANTS["cascading foreign key"] = (CASCADE_TOMBSTONE, "ALTER TABLE key_tombstones DROP CONSTRAINT planted")


def _three_versions(vault: Vault) -> None:
    """Alice with key versions 1, 2 and 3 (3 primary), every row re-wrapped under 3."""
    vault.put(ALICE, "t", 1, "x", "hello")
    vault.rotate_owner_key("alice")
    vault.rotate_owner_key("alice")
    vault.rewrap("alice")


@pytest.mark.parametrize("plant", sorted(OWNER_PLANTS))
def test_a_retirement_voided_by_a_planted_object_is_refused_not_reported(vault, db_path, keyring_backend, attacker,
                                                                         plant):
    _three_versions(vault)
    planted, dropped = OWNER_PLANTS[plant]
    attacker.run(planted)
    with pytest.raises(IntegrityError):
        vault.retire_old_key_versions("alice")
    assert any(finding.status == "FAIL" and "did not make" in finding.text for finding in describe(db_path))
    attacker.run(dropped)
    assert vault.retire_old_key_versions("alice") == 2
    assert [user.rsplit(".", 1)[1] for _, user in owner_key_entries(keyring_backend.secrets)] == ["3"]


@pytest.mark.parametrize("plant", sorted(OWNER_PLANTS))
def test_a_maintain_run_never_reports_a_retirement_a_planted_object_voided(vault, keyring_backend, attacker, plant):
    _three_versions(vault)
    attacker.run(OWNER_PLANTS[plant][0])
    try:
        report = vault.maintain_keys()
    except IntegrityError:
        return  # refused loudly before anything was reported retired
    left = sorted(int(user.rsplit(".", 1)[1]) for _, user in owner_key_entries(keyring_backend.secrets))
    assert report.retired == 0 or left == [4], (report, left)
    assert report.retired + len(report.failed) >= 1  # the planted object was met: retired anyway, or reported


@pytest.mark.skipif(STORE != "postgres", reason="the SQLite file is opened with foreign keys off: none can cascade")
def test_planted_swept_tombstones_and_a_cascading_key_never_keep_an_ended_epoch_key_silently(db_path, attacker):
    ring, clock = MemoryKeyring(), FakeClock(T0)
    first = int(T0) // E
    with Vault.open(db_path, keyring_backend=ring, clock=clock) as vault:
        vault.put(ALICE, "t", 0, "x", "makes the tables", ttl_seconds=20 * 86400)
        attacker.run(*[("INSERT INTO epoch_tombstones (length, epoch, attempt, check_value, swept) "
                        "VALUES (?, ?, 2, ?, true)", E, epoch, b"") for epoch in range(first, first + 72)],
                     "ALTER TABLE epoch_tombstones ADD CONSTRAINT planted FOREIGN KEY (length, epoch) "
                     "REFERENCES epoch_keys (length, epoch) ON DELETE CASCADE NOT VALID")
        for hour in range(8):
            clock.now = T0 + hour * E
            with contextlib.suppress(VaultError):  # the planted key may refuse it: only gc's report is in question
                vault.put(ALICE, "t", hour, "x", "an hour's row", ttl_seconds=600)
            clock.now += SKEW
            try:
                vault.gc()
            except VaultError:
                continue  # refused loudly: the planted key is reported, and doctor fails the database
            assert [entry for entry in epoch_entries(ring) if (int(entry.split(".")[1]) + 1) * E + SKEW <= clock.now] \
                == []
        assert any(finding.status == "FAIL" for finding in describe(db_path))
