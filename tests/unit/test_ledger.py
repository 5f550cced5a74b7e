"""Deletion ledgers and their keyring counts (keys/ledger.py; threat_model.md, "Rollback") without a Vault: the
counter's whole range sealed and opened back (0 and 2**63 - 1 included, one past either end refused), the
entries an added delete drops (an expiry at ``now`` is over), the exact refusals of a rollback, of an out-of-range
count and of a keyring count that is not one, and what ``record`` accepts on read-back (a count another process
raised higher, never a lower one or an entry gone). A bound off by one either refuses a genuine ledger (every
delete and extend_turn of its owner) or accepts a keyring value the rollback check then trusts.
"""

from __future__ import annotations

import re
import struct

import pytest

from keys.blind_index import IndexKey
from keys.errors import IntegrityError, KeyUnavailable
from keys.keyring.edge import REMEDY, KeyringEdge
from keys.ledger import MAX_COUNTER, DeletionLedgers, Ledger, SealedLedger, deletion_count_value
from keys.testing import MemoryKeyring
from tests.support.fault_counts import FaultDouble, Switch

VAULT_ID = bytes(range(16))
SERVICE = "scratchvault/000102030405060708090a0b0c0d0e0f/deletions"
INDEX = IndexKey(bytes(range(32, 64)))
OWNER = INDEX.owner_tag("alice")
ROW_A, ROW_B, ROW_C = b"a" * 16, b"b" * 16, b"c" * 16
NO_ENTRY = "<no entry>"
ALTERED = ("this owner's record of deleted rows in the database fails authentication (the file was altered); "
           "nothing was changed. Restore the database from backup")


def exactly(text: str) -> str:
    return f"^{re.escape(text)}$"


class RacedKeyring(MemoryKeyring, FaultDouble):
    """The in-memory keyring; while ``found_instead`` is set, each write leaves that value (or, for NO_ENTRY, no
    entry) in its place, as another process's write (or delete) landing right after it would."""

    found_instead = Switch()

    def set_password(self, service: str, username: str, password: str) -> None:
        super().set_password(service, username, password)
        if self.found_instead:
            self.failed()
            if self.found_instead == NO_ENTRY:
                del self.secrets[(service, username)]
            else:
                self.secrets[(service, username)] = self.found_instead


def ledgers(ring: MemoryKeyring | None = None) -> DeletionLedgers:
    return DeletionLedgers(KeyringEdge(ring if ring is not None else MemoryKeyring(), timeout=5), VAULT_ID)


# -- the count as the keyring holds it ----------------------------------------------------------------------------
def test_a_keyring_count_is_plain_decimal_from_zero_to_the_largest_counter():
    assert MAX_COUNTER == 9223372036854775807  # 19 digits, an SQLite INTEGER
    assert [deletion_count_value(text) for text in ("0", "1", "10", str(MAX_COUNTER))] == [0, 1, 10, MAX_COUNTER]


@pytest.mark.parametrize("text", ["", "00", "01", "007", "-1", "+1", " 1", "1 ", "1.0", "1e3", "\u0661", "x",
                                  str(MAX_COUNTER + 1), "9" * 19, "1" + "0" * 19, "0" + str(MAX_COUNTER)])
def test_anything_else_in_the_keyring_is_not_a_count(text):
    assert deletion_count_value(text) is None


def test_the_count_is_read_from_the_vaults_deletions_entry_of_the_owner():
    ring = MemoryKeyring()
    assert ledgers(ring).counter(OWNER) == 0  # no delete yet
    ring.secrets[(SERVICE, OWNER.hex())] = str(MAX_COUNTER)
    assert ledgers(ring).counter(OWNER) == MAX_COUNTER


def test_a_keyring_count_that_is_not_one_is_refused_naming_the_entry_to_restore_or_delete():
    ring = MemoryKeyring()
    ring.secrets[(SERVICE, OWNER.hex())] = "02"
    with pytest.raises(KeyUnavailable, match=exactly(
            "the keyring's count of deletes for an owner is not a count; restore it from the keyring backup, or "
            f"delete it (service {SERVICE}); {REMEDY}")):
        ledgers(ring).counter(OWNER)


# -- record: the read-back --------------------------------------------------------------------------------------
def test_a_recorded_count_is_stored_in_decimal_under_the_owner_tag():
    ring = MemoryKeyring()
    ledgers(ring).record(OWNER, 0)
    ledgers(ring).record(OWNER, MAX_COUNTER)
    assert ring.secrets == {(SERVICE, OWNER.hex()): str(MAX_COUNTER)}


def test_a_higher_count_found_on_read_back_keeps_the_promise_of_at_least_this_one():
    ring = RacedKeyring()
    ring.found_instead = "5"  # another process recorded its later delete meanwhile
    ledgers(ring).record(OWNER, 4)
    ledgers(ring).record(OWNER, 5)
    assert ring.secrets == {(SERVICE, OWNER.hex()): "5"} and ledgers(ring).counter(OWNER) == 5


@pytest.mark.parametrize(("found", "counter"), [("3", 4), ("x", 1), ("04", 1), (NO_ENTRY, 0), (NO_ENTRY, 4)])
def test_a_lower_count_a_value_that_is_not_a_count_or_no_entry_on_read_back_is_refused(found, counter):
    ring = RacedKeyring()
    ring.found_instead = found
    with pytest.raises(KeyUnavailable, match=exactly(
            "the keyring accepted a key but did not return it on read-back; it does not persist secrets. " + REMEDY)):
        ledgers(ring).record(OWNER, counter)


def test_a_value_that_is_not_a_count_read_back_counts_as_no_delete_so_it_keeps_a_count_of_zero():
    ring = RacedKeyring()
    ring.found_instead = "x"
    ledgers(ring).record(OWNER, 0)
    assert ring.secrets == {(SERVICE, OWNER.hex()): "x"}


# -- sealing and opening ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("counter", [0, 1, MAX_COUNTER])
def test_every_count_in_range_seals_and_opens_back(counter):
    ledger = Ledger(counter, {ROW_B: 2000.0, ROW_A: 1000.5})
    sealed = ledgers().seal(INDEX, OWNER, ledger)
    body = ROW_A + struct.pack(">d", 1000.5) + ROW_B + struct.pack(">d", 2000.0)  # sorted by row id
    assert sealed == SealedLedger(counter, body, INDEX.ledger_tag(VAULT_ID, OWNER, counter, body))
    assert ledgers().open(INDEX, OWNER, sealed) == ledger
    assert ledgers().check(INDEX, OWNER, sealed, counter) == ledger


@pytest.mark.parametrize("counter", [-1, MAX_COUNTER + 1])
def test_a_count_out_of_range_is_neither_sealed_nor_opened(counter):
    with pytest.raises(IntegrityError, match=exactly("an owner's count of deletes is out of range")):
        ledgers().seal(INDEX, OWNER, Ledger(counter))
    tag = INDEX.ledger_tag(VAULT_ID, OWNER, counter % 2**64, b"")  # the tag its 8 bytes would carry
    with pytest.raises(IntegrityError, match=exactly(ALTERED)):
        ledgers().open(INDEX, OWNER, SealedLedger(counter, b"", tag))


def test_a_body_that_is_not_whole_entries_is_altered_even_under_its_own_tag():
    body = Ledger(1, {ROW_A: 1.0}).body()[:-1]
    with pytest.raises(IntegrityError, match=exactly(ALTERED)):
        ledgers().open(INDEX, OWNER, SealedLedger(1, body, INDEX.ledger_tag(VAULT_ID, OWNER, 1, body)))


# -- the rollback check -------------------------------------------------------------------------------------------
def test_no_ledger_counts_no_delete():
    assert ledgers().check(INDEX, OWNER, None, 0) == Ledger()


@pytest.mark.parametrize(("counter", "floor"), [(None, 1), (0, 1), (6, 7)])
def test_a_ledger_counting_fewer_deletes_than_the_keyring_is_a_rollback_naming_the_service(counter, floor):
    sealed = None if counter is None else ledgers().seal(INDEX, OWNER, Ledger(counter))
    with pytest.raises(IntegrityError, match=exactly(
            "this owner's record of deleted rows in the database counts fewer deletes than the OS keyring does: the "
            "file (or its deletions table) was put back to an older copy, so rows the owner deleted may be back. "
            "Nothing was changed. Restore the newest copy of the database; if this older copy was restored on "
            f"purpose, remove this vault's deletion counters from the keyring (service {SERVICE}) to accept it "
            "as it is")):
        ledgers().check(INDEX, OWNER, sealed, floor)


def test_a_ledger_counting_more_deletes_than_the_keyring_is_no_alarm():
    sealed = ledgers().seal(INDEX, OWNER, Ledger(7, {ROW_A: 5.0}))
    assert ledgers().check(INDEX, OWNER, sealed, 3) == Ledger(7, {ROW_A: 5.0})


# -- the entries ---------------------------------------------------------------------------------------------------
def test_a_delete_drops_the_entries_whose_expiry_is_at_or_before_now_and_counts_one_more():
    before = Ledger(4, {ROW_A: 99.0, ROW_B: 100.0, ROW_C: 100.5})
    after = before.with_deleted([(b"d" * 16, 3600.0)], now=100.0)
    assert after == Ledger(5, {ROW_C: 100.5, b"d" * 16: 3600.0})
    assert after.names(ROW_C) and not after.names(ROW_B) and not after.names(ROW_A)
