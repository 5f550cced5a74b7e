"""The schema version guards mixed versions on one file. Opening raises an older file to the current version, so
an older scratchvault refuses it from then on: one that knows only version 1 would rewrap format 2 summaries
without sealing them again, and one that knows only version 2 would write random row ids that this one, which
finds a row from its id's encrypted seq, could not find in a file made without an index on ids, and one that
knows only version 3 would delete rows without entering them in their owner's ledger of deleted rows. A file made
before version 3 keeps that index, and its old rows read; a file of version 3 gains the index per-owner quotas
count with (version 4), over its old rows; a database from a newer scratchvault is refused."""

from __future__ import annotations

import pytest

from tests.storage.sqlite.layouts import (
    as_schema_3,
    id_indexes,
    legacy_file,
    set_user_version,
    usage_index,
    user_version,
)
from vault import Principal, QuotaExceeded, StorageError, Vault
from vault.storage.sqlite.schema import SCHEMA_VERSION


@pytest.mark.parametrize("old_version", [1, 2])
def test_a_file_from_before_version_3_is_raised_to_the_current_one_and_keeps_its_index_on_ids(
        db_path, attacker, keyring_backend, clock, old_version):
    assert SCHEMA_VERSION == 6
    legacy_file(db_path, old_version)
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault:
        assert user_version(db_path) == SCHEMA_VERSION and usage_index(db_path) == ["owner_tag", "size_bytes"]
        row = vault.put(Principal("alice"), "t", 1, "x", "kept").id
    attacker.shift_rows(1000)  # a row as version 2 wrote it: moved, found by its id alone
    assert id_indexes(db_path) == ["sqlite_autoindex_rows_1"]
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault:
        assert vault.get(Principal("alice"), row).content == "kept"
        assert vault.get(Principal("alice"), vault.put(Principal("alice"), "t", 2, "x", "new").id).content == "new"
        assert vault.list_for_turn(Principal("alice"), "t")[0].id == row


def test_a_new_file_has_no_index_on_row_ids(db_path, keyring_backend, clock):
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault:
        row = vault.put(Principal("alice"), "t", 1, "x", "kept").id
        assert vault.get(Principal("alice"), row).content == "kept"
    assert user_version(db_path) == SCHEMA_VERSION
    assert id_indexes(db_path) == []


def test_a_file_of_version_3_gains_the_usage_index_and_its_old_rows_count_against_quotas(db_path, keyring_backend,
                                                                                         clock):
    alice = Principal("alice")
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault:
        rows = [vault.put(alice, "t", step, "x", "old row").id for step in range(2)]
    as_schema_3(db_path)
    assert usage_index(db_path) == []
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock, owner_max_rows=3) as vault:
        assert user_version(db_path) == SCHEMA_VERSION and usage_index(db_path) == ["owner_tag", "size_bytes"]
        vault.put(alice, "t", 3, "x", "the third")
        with pytest.raises(QuotaExceeded, match="quota of 3 stored rows"):
            vault.put(alice, "t", 4, "x", "a fourth")
        assert [vault.get(alice, row).content for row in rows] == ["old row", "old row"]


def test_a_database_from_a_newer_scratchvault_is_refused_and_left_as_it_is(db_path, keyring_backend, clock):
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault:
        vault.put(Principal("alice"), "t", 1, "x", "kept")
    set_user_version(db_path, SCHEMA_VERSION + 1)
    with pytest.raises(StorageError, match="newer scratchvault"):
        Vault.open(db_path, keyring_backend=keyring_backend, clock=clock)
    assert user_version(db_path) == SCHEMA_VERSION + 1
