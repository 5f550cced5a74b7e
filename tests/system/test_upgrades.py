"""Upgrades: files made before schema 3 (every layout since the first) used for everything by this code; the
previous release (``PREVIOUS``, schema 3: one mutable keyring entry per owner) still running while this one raises the
schema and moves its keys to write-once entries; the previous release meeting a file made at schema 4.
threat_model.md, "Row ids" and "Keyring entries"; README, "Upgrading". An altered id in such a file is
tests/attacks/test_row_ids.py."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest

from tests.storage.sqlite.layouts import first_layout, legacy_file, user_version
from tests.support.file_keyring import FileKeyring, load, save
from tests.support.keyring_entries import holds_a_key, owner_username
from tests.system.releases import Previous, release_tree
from vault import InvalidArgument, KeyUnavailable, NotFound, Principal, Vault, storage
from vault.storage.sqlite.schema import SCHEMA_VERSION

PREVIOUS = "8c9bad0"  # the last commit before write-once keyring entries: SCHEMA_VERSION 3, one keyset entry per owner
SCHEMA_2_RELEASE = "5869981"  # the last commit before row ids named their seq: random ids, found by an id index
ALICE, BOB = Principal("alice"), Principal("bob")


@pytest.fixture(scope="module")
def previous_tree(tmp_path_factory) -> Path:
    return release_tree(tmp_path_factory, PREVIOUS)


@pytest.fixture(scope="module")
def schema_2_tree(tmp_path_factory) -> Path:
    return release_tree(tmp_path_factory, SCHEMA_2_RELEASE)


# -- the previous release and this one on one file ------------------------------------------------------------------
def owner_entries(ring: Path) -> dict[str, list[str]]:
    """The owner key entries in the test keyring file, by layout: one mutable keyset per owner (schema 3 and
    before) or one write-once entry per version (schema 4)."""
    names = [name.split("\0") for name in load(ring)]
    return {"keysets": sorted(user for service, user in names if service.endswith("/owner")),
            "versions": sorted(user for service, user in names if service.endswith("/owner-key"))}


# a row of format 3 (sealed under an expiry epoch) read by a release before it: refused, never misread
FAILS_CLOSED = {"error": "IntegrityError"}


def test_this_release_reads_the_previous_ones_keys_in_place_and_puts_new_versions_in_write_once_entries(
        previous_tree, ring, db_path, attacker):
    """No key comes back after a shred, across the upgrade: the previous release (schema 3, one mutable keyset entry
    per owner) makes the file and is still running when this one raises the schema. Every row reads here; versions
    made before are read from the old entry, never copied or rewritten (a late copy could outlive a shred); a new
    version gets its own write-once entry; a late write of the old entry with a version the file never recorded is
    never adopted; once no live key is kept in the old entry it is deleted whole, and the old process fails
    closed."""
    old = Previous(previous_tree, db_path, ring)
    try:
        assert old.opened == 3
        a1 = old("put", "alice", 1, "old one")
        assert old("rotate", "alice") == 2
        a2 = old("put", "alice", 2, "old two")
        with Vault.open(db_path, keyring_backend=FileKeyring()) as new:
            assert user_version(db_path) == SCHEMA_VERSION
            assert [new.get(ALICE, i).content for i in (a1, a2)] == ["old one", "old two"]
            n3 = new.put(ALICE, "t", 3, "x", "new three").id
            c1 = old("put", "carol", 1, "carol's")  # a new owner, in the old layout, while both run
            assert new.get(Principal("carol"), c1).content == "carol's"
            assert old("get", "alice", n3) == FAILS_CLOSED
            assert len(owner_entries(ring)["keysets"]) == 2 and owner_entries(ring)["versions"] == []
            # a hung write of the previous release lands late: alice's keyset plus a version never recorded
            secrets = load(ring)
            (index,) = [name.split("\0")[0] for name in secrets if name.endswith("\0index")]
            tag = owner_username(lambda service, user: secrets.get(f"{service}\0{user}"), index, "alice")[:-2]
            name = f"{index[:-len('/index')]}/owner\0{tag}"
            keyset = json.loads(secrets[name])
            keyset["keys"]["3"], keyset["primary"] = base64.b64encode(os.urandom(32)).decode(), 3
            save(ring, {**secrets, name: json.dumps(keyset)})
            assert new.rotate_owner_key("alice") == 3  # its own write-once entry; the late "3" is never used
            assert owner_entries(ring)["versions"] == [f"{tag}.3"]
            v4 = new.put(ALICE, "t", 4, "x", "new four").id
            assert [new.get(ALICE, i).content for i in (a1, a2, n3, v4)] == ["old one", "old two", "new three",
                                                                          "new four"]
            assert new.rewrap("alice") == 3 and new.retire_old_key_versions("alice") == 2
            assert len(owner_entries(ring)["keysets"]) == 1  # alice's old entry went whole; carol's stays
            assert old("rotate", "alice") == {"error": "KeyUnavailable"}  # it fails closed
            assert [new.get(ALICE, i).content for i in (a1, a2, n3, v4)] == ["old one", "old two", "new three",
                                                                          "new four"]
    finally:
        old.close()


def keys_in(ring) -> dict[str, str]:
    """The file keyring's entries that hold keys."""
    return {name: value for name, value in load(ring).items() if holds_a_key(tuple(name.split("\0", 1)))}


def test_reading_an_owner_kept_in_the_old_entry_writes_nothing_and_a_shred_deletes_it(previous_tree, ring, db_path,
                                                                                    tmp_path):
    """A read that copied a live old-layout key into a new entry could time out and land after a shred, so reads
    write nothing to the keyring; the shred deletes the old entry, and a backup from before it stays unreadable."""
    old = Previous(previous_tree, db_path, ring)
    try:
        a1 = old("put", "alice", 1, "old one")
    finally:
        old.close()
    before = keys_in(ring)
    with Vault.open(db_path, keyring_backend=FileKeyring()) as new:
        assert new.get(ALICE, a1).content == "old one" and new.list_for_turn(ALICE, "t")[0].id == a1
        assert keys_in(ring) == before  # no key written (the marks beside them hold only numbers)
        storage.backup(db_path, tmp_path / "copy.db")
        assert new.shred_owner("alice") == 1 and owner_entries(ring) == {"keysets": [], "versions": []}
    with Vault.open(tmp_path / "copy.db", keyring_backend=FileKeyring()) as copy, pytest.raises(KeyUnavailable):
        copy.get(ALICE, a1)


def test_an_owner_whose_primary_is_kept_in_the_old_entry_must_rotate_before_retiring(previous_tree, ring, db_path):
    """The old entry is never rewritten, so retiring some of the versions it keeps while another stays is refused
    with the remedy (rotate, rewrap, retire), and nothing is destroyed."""
    old = Previous(previous_tree, db_path, ring)
    try:
        a1 = old("put", "alice", 1, "old one")
        assert old("rotate", "alice") == 2
    finally:
        old.close()
    with Vault.open(db_path, keyring_backend=FileKeyring()) as new:
        assert new.rewrap("alice") == 1
        with pytest.raises(InvalidArgument, match="rotate_owner_key"):
            new.retire_old_key_versions("alice")
        assert new.get(ALICE, a1).content == "old one"
        new.rotate_owner_key("alice")
        new.rewrap("alice")
        assert new.retire_old_key_versions("alice") == 2 and owner_entries(ring)["keysets"] == []
        assert new.get(ALICE, a1).content == "old one"


def test_a_schema_2_release_still_running_when_the_schema_is_raised_shares_its_rows_and_fails_closed_on_keys(
        schema_2_tree, ring, db_path, attacker):
    """Random row ids written by a schema 2 process after the raise are found through the file's id index; once
    this release has retired the versions kept in an owner's old entry, that process fails closed
    (KeyUnavailable) where it needs the keyring."""
    old = Previous(schema_2_tree, db_path, ring)  # it makes the file: schema 2, unique index on ids
    try:
        assert old.opened == 2
        a1 = old("put", "alice", 1, "old one")
        with Vault.open(db_path, keyring_backend=FileKeyring()) as new:
            assert user_version(db_path) == SCHEMA_VERSION and new._store._ids_indexed is True
            n2 = new.put(ALICE, "t", 2, "x", "new two").id
            assert new.get(ALICE, a1).content == "old one" and old("get", "alice", n2) == FAILS_CLOSED
            a3 = old("put", "alice", 3, "old three")  # a random id, written after the raise (its keys cached)
            assert new.get(ALICE, a3).content == "old three"
            assert sorted(r.id for r in new.list_for_turn(ALICE, "t")) == sorted([a1, n2, a3])
            assert old("list", "alice") == FAILS_CLOSED  # n2's summary is of format 3
            # a seq reused across releases: the old one deletes the top row, the new one takes its seq
            assert old("delete", "alice", a3) is None
            n4 = new.put(ALICE, "t", 4, "x", "new four").id
            assert attacker.seq_of(n4) == 3
            with pytest.raises(NotFound):
                new.get(ALICE, a3)
            assert old("get", "alice", a3) == {"error": "NotFound"} and old("get", "bob", n4) == {"error": "NotFound"}
            assert old("get", "alice", n4) == FAILS_CLOSED
            # rotation here: the new version is in an entry the old process does not know, and its rewrap
            # "heals" by forgetting the recorded version its keyset lacks: the rotation is undone, nothing adopted
            assert new.rotate_owner_key("alice") == 2
            assert old("rewrap", "alice") == 0
            assert new.rotate_owner_key("alice") == 3  # versions are never reused
            assert new.rewrap("alice") == 3 and new.retire_old_key_versions("alice") == 1
            assert old("rotate", "alice") == {"error": "KeyUnavailable"}  # its old entry is gone: fails closed
            assert [new.get(ALICE, i).content for i in (a1, n2, n4)] == ["old one", "new two", "new four"]
            new.delete(ALICE, n2)
            assert old("get", "alice", n2) == {"error": "NotFound"}
            assert old("gc", 4e9) == 2 and attacker.counts() == (0, 0, 0)
            assert new.list_for_turn(ALICE, "t") == []
    finally:
        old.close()


def test_the_previous_release_refuses_a_file_made_at_schema_4_and_leaves_it_as_it_is(previous_tree, ring, db_path,
                                                                                     attacker):
    with Vault.open(db_path, keyring_backend=FileKeyring()) as new:
        row = new.put(ALICE, "t", 1, "x", "kept").id
    before = attacker.counts()
    old = Previous(previous_tree, db_path, ring)
    old.close()
    # it meets tables it does not know before it reads the version (README, "Upgrading": upgrade, do not restore)
    assert old.opened["error"] == "IntegrityError" and "schema objects" in old.opened["message"]
    assert user_version(db_path) == SCHEMA_VERSION and attacker.counts() == before
    with Vault.open(db_path, keyring_backend=FileKeyring()) as new:
        assert new.get(ALICE, row).content == "kept"


# -- files made before schema 3, used for everything by this release --------------------------------------------------


@pytest.mark.parametrize("layout", ["v1_autoincrement", "v1", "v2"])
def test_a_file_made_before_schema_3_serves_every_operation_by_its_id_index(db_path, attacker, keyring_backend, clock,
                                                                            layout):
    {"v1_autoincrement": first_layout, "v1": lambda p: legacy_file(p, 1), "v2": legacy_file}[layout](db_path)
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault:
        assert vault._store._ids_indexed is True
        ids = [vault.put(ALICE, "t", step, "x", f"row {step}", ttl_seconds=60).id for step in range(3)]
        top = vault.put(BOB, "t", 1, "x", "bob's top").id
        vault.delete(BOB, top)
        reuse = vault.put(ALICE, "t", 3, "x", "reuses bob's seq", ttl_seconds=60).id
        assert attacker.seq_of(reuse) == attacker.seq_of(ids[-1]) + 1
        for who in (ALICE, BOB):
            with pytest.raises(NotFound):
                vault.get(who, top)
        assert vault.extend_turn(ALICE, "t", 3600) == 4
        vault.rotate_owner_key("alice")
        assert vault.rewrap("alice") == 4 and vault.retire_old_key_versions("alice") == 1
        vault.delete(ALICE, ids[0])
        clock.advance(120)
        assert vault.gc() == 0  # extended past the clock
        assert sorted(r.id for r in vault.list_for_turn(ALICE, "t")) == sorted([*ids[1:], reuse])
        assert [vault.get(ALICE, i).content for i in ids[1:]] == ["row 1", "row 2"]
        assert vault.shred_owner("alice") == 3 and attacker.counts() == (0, 0, 0)
        after = vault.put(BOB, "t", 2, "x", "after the file emptied").id
        assert attacker.seq_of(after) == 1  # seqs restart: every earlier id of seq 1 must miss
        with pytest.raises(NotFound):
            vault.get(BOB, top)
        assert vault.get(BOB, after).content == "after the file emptied"



def test_gc_on_a_file_made_before_schema_3_removes_a_row_written_back_after_its_delete(db_path, attacker,
                                                                                   keyring_backend, clock):
    """gc's lookup of the rows a ledger names goes by the id index on such a file, and still finds the copy."""
    legacy_file(db_path)
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault:
        doomed, kept = (vault.put(ALICE, "t", step, "x", f"row {step}").id for step in range(2))
        copy = attacker.save_row(attacker.seq_of(doomed))
        vault.delete(ALICE, doomed)
        attacker.restore_row(copy)
        assert vault.gc() == 1 and attacker.row_ids() == {kept}

# -- the last release before deletion ledgers ---------------------------------------------------------------------
def test_a_file_made_before_ledgers_is_used_and_records_deletes_from_then_on(previous_tree, ring, db_path,
                                                                            attacker):
    """A file of the previous release (schema 3, no deletions table, no counts in the keyring) opens as an owner who
    deleted nothing: everything works, a delete starts the owner's ledger and count, and a copy of a row deleted
    from then on is NotFound and collected. The previous release then refuses the file (it checks for tables it did
    not make before the version; this release checks the version first) and leaves it as it is."""
    old = Previous(previous_tree, db_path, ring)
    try:
        assert old.opened == 3
        a1, a2, a3 = (old("put", "alice", step, f"row {step}") for step in (1, 2, 3))
        assert old("delete", "alice", a1) is None  # a delete no ledger records
    finally:
        old.close()
    saved = attacker.save_row(attacker.seq_of(a2))
    with Vault.open(db_path, keyring_backend=FileKeyring()) as new:
        assert user_version(db_path) == SCHEMA_VERSION and attacker.ledgers() == {}
        assert sorted(r.id for r in new.list_for_turn(ALICE, "t")) == sorted([a2, a3])
        assert new.extend_turn(ALICE, "t", 7200) == 2 and new.get(ALICE, a3).content == "row 3"
        new.delete(ALICE, a2)
        assert len(attacker.ledgers()) == 1
        assert [v for k, v in load(ring).items() if k.split("\0")[0].endswith("/deletions")] == ["1"]
        attacker.restore_row(saved)
        with pytest.raises(NotFound):
            new.get(ALICE, a2)
        assert new.gc() == 1 and sorted(attacker.row_ids()) == [a3]
    before = attacker.counts()
    refused = Previous(previous_tree, db_path, ring)
    refused.close()
    assert refused.opened["error"] == "IntegrityError" and "did not make" in refused.opened["message"]
    assert user_version(db_path) == SCHEMA_VERSION and attacker.counts() == before
