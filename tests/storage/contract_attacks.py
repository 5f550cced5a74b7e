"""The key bookkeeping against a writer of the database, as contract tests every store runs: an object planted on
the bookkeeping's tables while the store is open makes a destruction fail with IntegrityError and leave the records
as they were, never succeed without effect; a tombstone planted as swept is written unswept again. The store
supplies ``plant``, which runs statements on the store called "store" with the rights of the tables' owner
(portable SQL only)."""

from __future__ import annotations

import pytest

from tests.storage.contract_support import NOW, OWNER
from vault import IntegrityError

HOUR, E = 3600, 500_000  # an epoch of an hour, E ending at (E + 1) * HOUR
ENDS = (E + 1) * HOUR


def _two_versions(store) -> None:
    commitments = store.commitments
    for version in (1, 2):
        assert commitments.reserve_owner_version(OWNER, NOW, NOW - 60) == version
        commitments.record_owner_commitment(OWNER, version, b"v%d" % version, b"name")


class BookkeepingAttacksContract:
    """What a store's key bookkeeping does when its writer plants objects or rows."""

    @pytest.mark.parametrize("planted", ["CREATE UNIQUE INDEX planted ON key_tombstones (owner_tag)",
                                         "CREATE UNIQUE INDEX planted ON owner_keys (version)"])
    def test_a_destruction_through_a_planted_index_fails_and_destroys_nothing(self, store, plant, planted):
        _two_versions(store)
        plant(planted)
        with pytest.raises(IntegrityError):
            store.commitments.tombstone_owner_versions(OWNER, {1, 2})
        assert store.commitments.owner_commitments(OWNER) == {1: b"v1", 2: b"v2"}
        assert store.commitments.tombstones(OWNER, unswept_only=False) == []
        plant("DROP INDEX planted")
        assert store.commitments.tombstone_owner_versions(OWNER, {1, 2}) == {1, 2}
        assert [version for _, version, _ in store.commitments.tombstones(OWNER, unswept_only=True)] == [1, 2]

    def test_closing_epochs_through_a_planted_index_fails_and_closes_nothing(self, store, plant):
        records = store.commitments
        assert records.reserve_epoch(HOUR, E, NOW, NOW - 60) == 1
        records.record_epoch_commitment(HOUR, E, 1, b"key")
        plant("CREATE UNIQUE INDEX planted ON epoch_tombstones (length)")
        with pytest.raises(IntegrityError):
            records.close_epochs(ENDS)
        assert records.epoch_commitment(HOUR, E) == (1, b"key")
        plant("DROP INDEX planted")
        assert records.close_epochs(ENDS) == [(HOUR, E)]
        assert records.epoch_commitment(HOUR, E) is None

    def test_a_tombstone_planted_as_swept_is_written_unswept_by_a_destruction(self, store, plant):
        _two_versions(store)
        postgres = "postgres" in type(store).__module__
        tag, empty = (f"'\\x{OWNER.hex()}'::bytea", "'\\x'::bytea") if postgres else (f"x'{OWNER.hex()}'", "x''")
        plant("INSERT INTO key_tombstones (owner_tag, version, check_value, swept) VALUES "
              f"({tag}, 1, {empty}, {'true' if postgres else '1'})")
        store.commitments.tombstone_owner_versions(OWNER, {1})
        assert store.commitments.tombstones(OWNER, unswept_only=True) == [(OWNER, 1, False)]

    def test_no_commitment_is_recorded_for_a_tombstoned_version(self, store):
        commitments = store.commitments
        version = commitments.reserve_owner_version(OWNER, NOW, NOW - 60)
        commitments.tombstone_owner_versions(OWNER, {version})
        commitments.record_owner_commitment(OWNER, version, b"late", b"name")
        assert commitments.owner_commitments(OWNER) == {}
