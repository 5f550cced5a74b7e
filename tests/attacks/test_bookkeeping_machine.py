"""The key bookkeeping against an attacker as a rule of a stateful test, on the store under test: two hosts (vaults on
one database and one keyring, the second's clock within the skew allowance of the first) put, delete, shred, run
maintain, and collect expired rows, while the attacker deletes any owner's bookkeeping records, plants
reservations and swept tombstones, and takes copies of the database. After every destruction that returned:
nothing it destroyed opens from any copy taken before, and the keyring holds no entry of a shredded owner; after
every step, an acknowledged row reads back its own content until its expiry, delete or shred, or the vault reports
trouble (a VaultError), never other content. SCRATCHVAULT_MACHINE_EXAMPLES runs more examples (default 8)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from keys.testing import MemoryKeyring
from tests.attacks.stores import attacker_class
from tests.support.clock import T0, FakeClock
from tests.support.epochs import SKEW, E
from tests.support.keyring_entries import owner_key_entries
from vault import Principal, Vault, VaultError, storage

OWNERS = ("alice", "bob")


@pytest.fixture(autouse=True)
def _store_under_test(attacker_for):
    """The store the attacker's locations are made on (on PostgreSQL, the test database)."""
    return attacker_for
BOOKKEEPING = ("key_tombstones", "owner_keys", "key_reservations")
EPOCHS = ("epoch_keys", "epoch_reservations", "epoch_tombstones")


class KeyBookkeepingUnderAttack(RuleBasedStateMachine):
    """Model: row id -> (owner, content, expires_at) of acknowledged live rows; ``destroyed``: (owner, row id) of
    rows a returned shred, delete or gc destroyed; ``copies``: locations of the attacker's copies."""

    def __init__(self) -> None:
        super().__init__()
        self.directory = Path(tempfile.mkdtemp())
        self.attacker = attacker_class()(self.directory / "v.db")
        self.ring, self.clock, self.skewed = MemoryKeyring(), FakeClock(T0), FakeClock(T0 - SKEW // 2)
        self.clocks = (self.clock, self.skewed)
        self.hosts = [Vault.open(self.attacker.location, keyring_backend=self.ring, clock=clock)
                      for clock in self.clocks]
        self.rows: dict[str, tuple[str, str, float]] = {}
        self.destroyed: list[tuple[str, str, float]] = []  # (owner, row id, when the destroying call returned)
        self.copies: list[tuple[str | Path, float]] = []  # (location, when taken)
        self.tags: dict[str, set[str]] = {owner: set() for owner in OWNERS}  # owner -> owner tags seen in the keyring
        self.serial = 0

    def teardown(self) -> None:
        for host in self.hosts:
            host.close()
        attacker_class().discard(self.directory)
        shutil.rmtree(self.directory, ignore_errors=True)

    def _note_tags(self, owner: str, before: set[str]) -> None:
        self.tags[owner] |= {user.split(".")[0] for _, user in owner_key_entries(self.ring.secrets)} - before

    @rule(host=st.integers(0, 1), owner=st.sampled_from(OWNERS), ttl=st.sampled_from([600, 5400, 20000]))
    def put(self, host, owner, ttl):
        before = {user.split(".")[0] for _, user in owner_key_entries(self.ring.secrets)}
        self.serial += 1
        content = f"{owner}'s observation {self.serial}"
        try:
            row = self.hosts[host].put(Principal(owner), "t", self.serial, "x", content, ttl_seconds=ttl)
        except VaultError:
            return  # refused (a planted record, a closed epoch): nothing acknowledged
        self.rows[row.id] = (owner, content, self.clocks[host].now + ttl)
        self._note_tags(owner, before)

    @rule(host=st.integers(0, 1), pick=st.integers(0, 50))
    def delete(self, host, pick):
        if not self.rows:
            return
        row_id = sorted(self.rows)[pick % len(self.rows)]
        owner = self.rows[row_id][0]
        try:
            self.hosts[host].delete(Principal(owner), row_id)
        except VaultError:
            return
        del self.rows[row_id]

    @rule(host=st.integers(0, 1), owner=st.sampled_from(OWNERS))
    def shred(self, host, owner):
        try:
            self.hosts[host].shred_owner(owner)
        except VaultError:
            return  # refused loudly: nothing is claimed destroyed
        now = self.clock.now
        for row_id in [row_id for row_id, row in self.rows.items() if row[0] == owner]:
            self.destroyed.append((owner, row_id, now))
            del self.rows[row_id]
        left = [user for _, user in owner_key_entries(self.ring.secrets) if user.split(".")[0] in self.tags[owner]]
        assert left == [], f"a shred of {owner} returned with entries of theirs in the keyring: {left}"
        self._check_copies()

    @rule(host=st.integers(0, 1))
    def maintain(self, host):
        try:
            self.hosts[host].maintain_keys()
        except VaultError:
            return

    @rule(hours=st.integers(1, 3), host=st.integers(0, 1))
    def time_passes_and_gc(self, hours, host):
        for clock in (self.clock, self.skewed):
            clock.advance(hours * E)
        try:
            self.hosts[host].gc()
        except VaultError:
            return
        ended = self.clocks[host].now - SKEW
        for row_id, (owner, _, expires) in list(self.rows.items()):
            if expires <= self.clocks[host].now:
                del self.rows[row_id]
                if (int(expires) // E + 1) * E <= ended:  # its epoch ended and was destroyed by this gc
                    self.destroyed.append((owner, row_id, self.clock.now))
        self._check_copies()

    @rule(tables=st.sampled_from([BOOKKEEPING, EPOCHS, *((table,) for table in BOOKKEEPING + EPOCHS)]))
    def attacker_deletes_records(self, tables):
        self.attacker.run(*(f"DELETE FROM {table}" for table in tables))

    @rule(version=st.integers(2, 40), swept=st.booleans())
    def attacker_plants_a_tombstone_and_a_reservation(self, version, swept):
        for tag in {tag for tags in self.tags.values() for tag in tags}:
            owner_tag = bytes.fromhex(tag)
            self.attacker.run(("DELETE FROM key_tombstones WHERE owner_tag = ? AND version = ?", owner_tag, version),
                              ("INSERT INTO key_tombstones (owner_tag, version, check_value, swept) "
                               "VALUES (?, ?, ?, ?)", owner_tag, version, b"", swept),
                              ("DELETE FROM key_reservations WHERE owner_tag = ? AND version = ?", owner_tag,
                               version + 1),
                              ("INSERT INTO key_reservations (owner_tag, version, reserved_at) VALUES (?, ?, ?)",
                               owner_tag, version + 1, 0.0))

    @rule()
    def attacker_takes_a_copy(self):
        if len(self.copies) >= 3:
            return
        target = attacker_class()(self.directory / f"copy-{len(self.copies)}.db").location
        storage.backup(self.attacker.location, target)
        self.copies.append((target, self.clock.now))

    def _check_copies(self) -> None:
        """Nothing destroyed after a copy was taken opens from it, with the clock wound back to when it was taken."""
        for location, taken in self.copies:
            gone = [(owner, row_id) for owner, row_id, when in self.destroyed if when >= taken]
            if not gone:
                continue
            with Vault.open(location, keyring_backend=self.ring, clock=FakeClock(taken)) as copy:
                for owner, row_id in gone:
                    try:
                        copy.get(Principal(owner), row_id)
                    except VaultError:
                        continue
                    raise AssertionError(f"a row of {owner} destroyed after a copy was taken opens from it")

    @invariant()
    def acknowledged_rows_read_back_or_the_vault_reports_trouble(self):
        for row_id, (owner, content, expires) in self.rows.items():
            if expires <= self.clock.now:
                continue
            try:
                found = self.hosts[0].get(Principal(owner), row_id).content
            except VaultError:
                continue  # the attacker's edits may make it unreadable: reported, never wrong
            assert found == content


TestKeyBookkeepingUnderAttack = KeyBookkeepingUnderAttack.TestCase
TestKeyBookkeepingUnderAttack.settings = settings(
    max_examples=int(os.environ.get("SCRATCHVAULT_MACHINE_EXAMPLES", "8")), stateful_step_count=20, deadline=None,
    database=None)


def test_a_shred_after_the_attacker_deleted_every_owner_version_record_leaves_no_entry():
    """A sequence of the machine's rules kept as a regression test: the writer deletes every record of the owner's
    versions, then the owner is shredded."""
    machine = KeyBookkeepingUnderAttack()
    try:
        machine.put(host=0, owner="alice", ttl=600)
        machine.attacker_takes_a_copy()
        machine.attacker_deletes_records(tables=BOOKKEEPING)
        machine.shred(host=1, owner="alice")
        machine.acknowledged_rows_read_back_or_the_vault_reports_trouble()
    finally:
        machine.teardown()
