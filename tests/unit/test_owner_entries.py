"""The keyring entries of owner key versions (keys/keyring/owner_entries.py) on a MemoryKeyring over a SQLite file's
key records: which versions a new version's write refuses and the marks it raises; which entries a shred asks for and
deletes, and which it keeps; what the sweeps delete, count and record; and when the old layout's entry goes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from keys.commitments import KeyCommitments
from keys.errors import KeyUnavailable
from keys.keyring.edge import KeyringEdge
from keys.keyring.owner_entries import OwnerEntries
from keys.keyring.owner_marks import ALWAYS_PROBED, PROBE_GAP
from keys.owner_keyset import OwnerKeyset
from keys.testing import MemoryKeyring
from vault import storage

VAULT_ID = bytes(range(16))
OWNER, OTHER = b"o" * 32, b"p" * 32
SERVICE = f"scratchvault/{VAULT_ID.hex()}/owner-key"
SCHEMA3_SERVICE = f"scratchvault/{VAULT_ID.hex()}/owner"
FIRST_PAST_PROBE = ALWAYS_PROBED + PROBE_GAP + 1  # the lowest version a fresh owner's shred does not ask for


class AskedKeyring(MemoryKeyring):
    """The in-memory keyring, also listing the owner key versions asked for and the entries deleted, in order; the
    owner's entries of ``unreadable`` versions it reports there but fails to read while they exist (as OpenBao does
    a version deleted but not destroyed)."""

    def __init__(self, *unreadable: int) -> None:
        super().__init__()
        self.asked: list[tuple[str, int]] = []
        self.deleted: list[tuple[str, str]] = []
        self.unreadable = {(SERVICE, f"{OWNER.hex()}.{version}") for version in unreadable}

    def get_password(self, service: str, username: str) -> str | None:
        if service == SERVICE:
            tag, _, version = username.partition(".")
            self.asked.append((tag, int(version)))
        found = super().get_password(service, username)
        if (service, username) in self.unreadable and found is not None:
            raise OSError("the keyring cannot read this entry")
        return found

    def delete_password(self, service: str, username: str) -> None:
        self.deleted.append((service, username))
        super().delete_password(service, username)

    def versions_asked(self, owner_tag: bytes) -> list[int]:
        return list(dict.fromkeys(version for tag, version in self.asked if tag == owner_tag.hex()))


@pytest.fixture
def records(tmp_path) -> Iterator[KeyCommitments]:
    store = storage.open_store(tmp_path / "keys.db")
    yield store.commitments
    store.close()


@pytest.fixture
def ring() -> AskedKeyring:
    return AskedKeyring()


@pytest.fixture
def entries(ring: AskedKeyring, records: KeyCommitments) -> OwnerEntries:
    return OwnerEntries(KeyringEdge(ring, timeout=5), VAULT_ID, records)


def plant(ring: MemoryKeyring, *versions: int, owner_tag: bytes = OWNER) -> None:
    """Entries of these versions, as an earlier write (or a late one) left them."""
    for version in versions:
        ring.secrets[(SERVICE, f"{owner_tag.hex()}.{version}")] = OwnerKeyset.generate(version).entry(version).reveal()


def present(ring: MemoryKeyring, owner_tag: bytes = OWNER) -> set[int]:
    return {int(user.partition(".")[2]) for service, user in ring.secrets
            if service == SERVICE and user.startswith(owner_tag.hex() + ".")}


def record_live(records: KeyCommitments, version: int, keyset: OwnerKeyset | None = None) -> None:
    value = (keyset or OwnerKeyset.generate(version)).commitment(version, VAULT_ID)
    records.record_owner_commitment(OWNER, version, value, b"sealed name")


# a new version's write
def test_a_written_version_reads_back_as_its_own_keyset(entries):
    entries.write_new(OWNER, 3, OwnerKeyset.generate(3))
    found = entries.read(OWNER, 3)
    assert found is not None and found.primary == 3 and found.versions == (3,)
    assert entries.read(OWNER, 4) is None


def test_an_entry_already_under_a_new_version_is_deleted_and_counted_before_the_new_key_is_written(entries, ring):
    """Deleted, not just overwritten: a keyring that keeps an entry's earlier values (OpenBao's versions) would keep
    the key found there."""
    plant(ring, 3)
    keyset = OwnerKeyset.generate(3)
    entries.write_new(OWNER, 3, keyset)
    assert ring.deleted == [(SERVICE, f"{OWNER.hex()}.3")]
    written = entries.read(OWNER, 3)
    assert written is not None and written.commitment(3, VAULT_ID) == keyset.commitment(3, VAULT_ID)
    assert entries.destroyed_on_sight == 1
    entries.write_new(OWNER, 4, OwnerKeyset.generate(4))
    assert entries.destroyed_on_sight == 1


def test_a_version_below_the_retired_mark_is_refused_unwritten_and_the_mark_itself_is_written(entries, ring):
    entries.retire_below(OWNER, 3)
    with pytest.raises(KeyUnavailable) as refused:
        entries.write_new(OWNER, 2, OwnerKeyset.generate(2))
    assert str(refused.value) == "this owner key version was retired while it was being made; retry"
    assert present(ring) == set()
    entries.write_new(OWNER, 3, OwnerKeyset.generate(3))
    assert present(ring) == {3}


def test_a_version_past_the_issued_mark_by_more_than_the_probe_gap_is_refused_unwritten(entries, ring):
    with pytest.raises(KeyUnavailable) as refused:
        entries.write_new(OWNER, FIRST_PAST_PROBE, OwnerKeyset.generate(FIRST_PAST_PROBE))
    assert str(refused.value) == (
        "the database numbers this owner's next key version far past any the keyring issued (a writer of the "
        "database); nothing was written. Check it with 'scratchvault doctor'")
    assert present(ring) == set() and entries.marks.read("issued", OWNER) == 0
    entries.write_new(OWNER, FIRST_PAST_PROBE - 1, OwnerKeyset.generate(FIRST_PAST_PROBE - 1))
    assert present(ring) == {FIRST_PAST_PROBE - 1}


def test_the_issued_mark_lets_a_version_as_far_past_it_as_the_probe_gap_be_written(entries, ring):
    entries.marks.raise_to("issued", OWNER, 40)
    entries.write_new(OWNER, 40 + PROBE_GAP, OwnerKeyset.generate(40 + PROBE_GAP))
    assert present(ring) == {40 + PROBE_GAP} and entries.marks.read("issued", OWNER) == 40 + PROBE_GAP


def test_only_a_version_past_those_always_probed_raises_the_owners_issued_mark(entries):
    entries.write_new(OWNER, ALWAYS_PROBED, OwnerKeyset.generate(ALWAYS_PROBED))
    assert entries.marks.read("issued", OWNER) == 0
    entries.write_new(OWNER, ALWAYS_PROBED + 1, OwnerKeyset.generate(ALWAYS_PROBED + 1))
    assert entries.marks.read("issued", OWNER) == ALWAYS_PROBED + 1 and entries.marks.read("issued", OTHER) == 0


# the shred's probe
def test_a_shred_asks_for_each_version_up_to_the_probe_and_deletes_every_one_found(entries, ring):
    top = ALWAYS_PROBED + PROBE_GAP
    plant(ring, *range(1, top + 2))
    assert entries.destroy_unlisted(OWNER, {1}) == top
    assert ring.versions_asked(OWNER) == list(range(1, top + 1))
    assert present(ring) == {top + 1} and entries.destroyed_on_sight == top


def test_a_shred_asks_as_far_past_the_issued_mark_as_the_probe_gap(entries, ring):
    entries.marks.raise_to("issued", OWNER, 40)
    plant(ring, 40 + PROBE_GAP, 41 + PROBE_GAP)
    assert entries.destroy_unlisted(OWNER, {1}) == 1
    assert ring.versions_asked(OWNER) == list(range(1, 41 + PROBE_GAP))
    assert present(ring) == {41 + PROBE_GAP}


def test_a_shred_deletes_by_name_each_version_past_the_probe_that_it_or_a_tombstone_names(entries, ring, records):
    far, farther, swept = FIRST_PAST_PROBE + 5, FIRST_PAST_PROBE + 9, FIRST_PAST_PROBE + 7
    records.tombstone_owner_versions(OWNER, {far, swept})
    records.mark_swept(OWNER, [swept])
    plant(ring, far, farther, swept, FIRST_PAST_PROBE)
    assert entries.destroy_unlisted(OWNER, {1, farther}) == 3
    assert ring.versions_asked(OWNER) == [*range(1, FIRST_PAST_PROBE), far, swept, farther]
    assert present(ring) == {FIRST_PAST_PROBE}


def test_a_shred_asks_for_each_version_once_even_one_a_tombstone_names(entries, ring, records):
    top = ALWAYS_PROBED + PROBE_GAP
    records.tombstone_owner_versions(OWNER, {top})
    assert entries.destroy_unlisted(OWNER, {1, top}) == 0
    assert [version for _, version in ring.asked] == list(range(1, top + 1))


def test_a_shred_keeps_the_versions_made_since_recorded_or_reserved_and_deletes_the_rest(entries, ring, records):
    assert [records.reserve_owner_version(OWNER, 100.0, 60.0) for _ in range(4)] == [1, 2, 3, 4]
    record_live(records, 1)
    record_live(records, 3)
    plant(ring, 1, 2, 3, 4, 5, 6)
    assert entries.destroy_unlisted(OWNER, {2}) == 4  # 2, though reserved, and the recorded 1 it succeeded go too
    assert present(ring) == {3, 4}


def test_a_shred_of_no_versions_keeps_the_recorded_ones(entries, ring, records):
    record_live(records, 1)
    plant(ring, 1, 2)
    assert entries.destroy_unlisted(OWNER, set()) == 1
    assert present(ring) == {1}


def test_a_shred_and_a_sweep_delete_an_entry_the_keyring_reports_but_cannot_read(records):
    ring = AskedKeyring(2, 5)
    entries = OwnerEntries(KeyringEdge(ring, timeout=5), VAULT_ID, records)
    plant(ring, 2)
    assert entries.destroy_unlisted(OWNER, {1}) == 1 and present(ring) == set()
    plant(ring, 5)
    records.tombstone_owner_versions(OWNER, {5})
    assert entries.sweep(OWNER) == 0 and present(ring) == set()


def test_entries_deleted_on_sight_add_up_over_shreds(entries, ring):
    plant(ring, 1, 2)
    assert entries.destroy_unlisted(OWNER, {1}) == 2
    plant(ring, 5)
    assert entries.destroy_unlisted(OWNER, {1}) == 1
    assert entries.destroyed_on_sight == 3


# the sweeps
def test_a_sweep_deletes_tombstoned_entries_once_and_after_that_counts_only_those_back_when_asked(entries, ring,
                                                                                                    records):
    records.tombstone_owner_versions(OWNER, {1, 2})
    plant(ring, 1)
    assert entries.sweep(OWNER) == 0 and present(ring) == set()
    assert records.tombstones(OWNER, unswept_only=True) == []
    plant(ring, 1, 2)  # writes given up that landed late
    assert entries.sweep(OWNER) == 0 and entries.sweep(None) == 0 and present(ring) == {1, 2}
    assert entries.sweep(OWNER, everything=True) == 2 and present(ring) == set()
    plant(ring, 2)
    assert entries.sweep(None, everything=True) == 1 and present(ring) == set()
    assert entries.destroyed_on_sight == 3


def test_a_sweep_of_all_owners_deletes_each_owners_unswept_tombstoned_entries(entries, ring, records):
    records.tombstone_owner_versions(OWNER, {1})
    records.tombstone_owner_versions(OTHER, {2})
    plant(ring, 1, 3)
    plant(ring, 2, owner_tag=OTHER)
    assert entries.sweep(None) == 0
    assert present(ring) == {3} and present(ring, OTHER) == set()
    assert records.tombstones(None, unswept_only=True) == []


def test_a_sweep_of_one_owner_leaves_another_owners_entries(entries, ring, records):
    records.tombstone_owner_versions(OTHER, {1})
    records.tombstone_owner_versions(OWNER, {2})
    plant(ring, 1, owner_tag=OTHER)
    plant(ring, 1, 2)
    assert entries.sweep(OWNER) == 0
    assert present(ring) == {1} and present(ring, OTHER) == {1}
    assert records.tombstones(OTHER, unswept_only=True) == [(OTHER, 1, False)]


def test_a_version_destroyed_here_that_no_tombstone_names_is_deleted_and_counted(entries, ring):
    plant(ring, 5, 6)
    assert entries.sweep(OWNER, destroyed={5}) == 1
    assert present(ring) == {6} and entries.destroyed_on_sight == 1


def test_a_sweep_deletes_the_versions_the_retired_mark_covers_counting_those_no_tombstone_names(entries, ring,
                                                                                                 records):
    entries.retire_below(OWNER, 4)
    records.tombstone_owner_versions(OWNER, {1})
    plant(ring, 1, 3, 4)  # 2 is already gone
    assert entries.sweep(OWNER, destroyed={2}) == 1
    assert present(ring) == {4} and entries.marks.read("swept", OWNER) == 4


def test_a_sweep_of_an_owner_with_nothing_retired_or_destroyed_reads_only_its_retired_and_swept_marks(entries, ring):
    reads = ring.reads
    assert entries.sweep(OWNER) == 0
    assert ring.reads - reads == 2 and ring.secrets == {}


def test_a_sweep_asks_only_for_retired_versions_its_swept_mark_does_not_cover(entries, ring):
    entries.retire_below(OWNER, 3)
    assert entries.sweep(OWNER) == 0 and ring.versions_asked(OWNER) == [1, 2]
    entries.retire_below(OWNER, 6)
    plant(ring, 2, 3, 5)
    ring.asked.clear()
    assert entries.sweep(OWNER) == 2
    assert ring.versions_asked(OWNER) == [3, 4, 5] and present(ring) == {2}
    assert entries.marks.read("swept", OWNER) == 6


# the entry of files made before schema 4
def test_the_old_layouts_live_versions_are_those_recorded_with_its_very_key(entries, ring, records):
    assert entries.schema3_live_versions(OWNER) is None
    keyset = OwnerKeyset.generate(1).with_new_version(2).with_new_version(3)
    ring.secrets[(SCHEMA3_SERVICE, OWNER.hex())] = keyset.serialize().reveal()
    record_live(records, 1, keyset)
    record_live(records, 2)  # another key under the same version
    assert entries.schema3_live_versions(OWNER) == {1}


def test_a_sweep_deletes_the_old_layouts_entry_once_no_live_key_is_kept_there(entries, ring, records):
    keyset = OwnerKeyset.generate(1).with_new_version(2)
    ring.secrets[(SCHEMA3_SERVICE, OWNER.hex())] = keyset.serialize().reveal()
    record_live(records, 1, keyset)
    record_live(records, 2, keyset)
    records.tombstone_owner_versions(OWNER, {1})
    entries.sweep(OWNER)
    assert (SCHEMA3_SERVICE, OWNER.hex()) in ring.secrets
    records.tombstone_owner_versions(OWNER, {2})
    entries.sweep(OWNER)
    assert (SCHEMA3_SERVICE, OWNER.hex()) not in ring.secrets
