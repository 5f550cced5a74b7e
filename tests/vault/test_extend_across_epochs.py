"""extend_turn across expiry epochs (threat_model.md, "Expiry epochs"): a row extended from epoch e into
epoch e + n is wrapped and sealed again under the new epoch's key, so it outlives the destruction of e's key, while a
copy of the database taken before the extension holds it only under e and gives nothing of it once e is destroyed.
Its clear columns are read as an attacker reads them (tests/attacks)."""

from __future__ import annotations

from tests.support.clock import T0
from tests.support.epochs import SKEW, E, assert_nothing_of, epoch_entries, outcomes
from vault import NotFound, Vault

PAGES = {step: f"page {step}: the dentist is on Tuesday. " * (30 + 400 * step) for step in range(3)}


def rows_extended_after_a_copy(db_path, keyring, clock, attacker, backup, alice):
    """Three rows of epoch 500,000 (one of several chunks), a copy, then extend_turn into epoch 500,003 at
    T0 + 100; returns (their ids, their raw parts before the extension)."""
    with Vault.open(db_path, keyring_backend=keyring, clock=clock) as vault:
        ids = [vault.put(alice, "t", step, "tool", page, ttl_seconds=600).id for step, page in PAGES.items()]
    attacker.copy_file(backup)
    before = {row_id: attacker.row_parts(row_id) for row_id in ids}
    clock.now = T0 + 100
    with Vault.open(db_path, keyring_backend=keyring, clock=clock) as vault:
        assert vault.extend_turn(alice, "t", 3 * E) == 3
    assert epoch_entries(keyring) == [f"{E}.500000.1", f"{E}.500003.1"]
    return ids, before


def test_extended_rows_are_sealed_again_under_the_new_epoch_and_outlive_the_old_epochs_destruction(
        db_path, keyring_backend, clock, attacker, location_named, alice):
    """The wrapped key, metadata and summary change (the chunks, under the unchanged data key, do not); once epoch
    500,000 is destroyed the rows still read, whole and by slice, and list, until their new expiry."""
    ids, before = rows_extended_after_a_copy(db_path, keyring_backend, clock, attacker, location_named("copy"), alice)
    for row_id in ids:
        after = attacker.row_parts(row_id)
        columns = attacker.row(attacker.seq_of(row_id))
        assert columns["expires_at"] == T0 + 100 + 3 * E
        for part in ("wrapped_key", "metadata", "summary"):
            assert after[part] != before[row_id][part], part
        assert len(after["wrapped_key"]) == len(before[row_id]["wrapped_key"]) == 65
        assert after["first_chunk"] == before[row_id]["first_chunk"]
    clock.now = T0 + E + SKEW
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault:
        assert vault.gc() == 0
        assert epoch_entries(keyring_backend) == [f"{E}.500003.1"]
        for step, row_id in enumerate(ids):
            assert vault.get(alice, row_id).content == PAGES[step]
            assert vault.read(alice, row_id, mode="tail", n=50).content == PAGES[step][-50:]
        assert [rep.id for rep in vault.list_for_turn(alice, "t")] == ids
        clock.now = T0 + 100 + 3 * E
        assert vault.gc() == 3 and vault.stats()["counters"]["integrity_failures"] == 0


def test_a_copy_taken_before_the_extension_gives_nothing_of_the_rows_once_the_old_epoch_is_destroyed(
        db_path, keyring_backend, clock, attacker, location_named, alice):
    """Holds today: the copy still holds the rows under epoch 500,000; after its destruction they give nothing,
    by the clock (NotFound) or with the clock wound back to the copy's time; the live rows still read."""
    backup = location_named("copy")
    ids, _ = rows_extended_after_a_copy(db_path, keyring_backend, clock, attacker, backup, alice)
    clock.now = T0 + E + SKEW
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault:
        vault.gc()
    with Vault.open(backup, keyring_backend=keyring_backend, clock=clock) as copy:
        for row_id in ids:
            assert outcomes(copy, alice, row_id) == {"get": NotFound, "read": NotFound, "list": None}
        clock.now = T0 + 1
        for step, row_id in enumerate(ids):
            assert_nothing_of(copy, alice, row_id, marker=PAGES[step][:20])
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault:
        assert [vault.get(alice, row_id).content for row_id in ids] == list(PAGES.values())


def test_a_copy_taken_before_the_extension_finds_the_rows_not_found_with_the_clock_wound_back(
        db_path, keyring_backend, clock, attacker, location_named, alice):
    backup = location_named("copy")
    ids, _ = rows_extended_after_a_copy(db_path, keyring_backend, clock, attacker, backup, alice)
    clock.now = T0 + E + SKEW
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault:
        vault.gc()
    clock.now = T0 + 1
    with Vault.open(backup, keyring_backend=keyring_backend, clock=clock) as copy:
        for row_id in ids:
            assert outcomes(copy, alice, row_id) == {"get": NotFound, "read": NotFound, "list": None}
