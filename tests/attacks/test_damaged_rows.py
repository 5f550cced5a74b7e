"""Damage an operator has to act on: a row naming a key version its owner lacks costs at most two keyring
reads; a row whose summary was altered stops rewrap with its id and a remedy, and the batch it stopped rolls
back; one whose wrapped key was altered goes only with its expiry; text stored where the vault keeps bytes is an
IntegrityError that quotes nothing; a format 1 record with fields of the wrong type (sealed by an older writer)
is an IntegrityError, never another exception."""

from __future__ import annotations

import json
import logging

import pytest

from keys.formats.context import RowContext
from keys.formats.v1 import summary_aad
from keys.testing import MemoryKeyring
from vault import IntegrityError, Principal, Vault

ALICE = Principal("alice")


def test_a_row_naming_a_key_version_the_owner_lacks_costs_at_most_two_keyring_reads(db_path, clock, attacker):
    """The keyset is reloaded once when a row names an unknown version (rotated elsewhere?); a version still
    unknown after that is tampering at once, not a second reload."""
    ring = MemoryKeyring()
    with Vault.open(db_path, keyring_backend=ring, clock=clock) as vault:
        row = vault.put(ALICE, "t", 1, "x", "hello").id
    attacker.write(attacker.seq_of(row), "key_version", 7)
    for call in (lambda v: v.list_for_turn(ALICE, "t"), lambda v: v.read(ALICE, row)):
        with Vault.open(db_path, keyring_backend=ring, clock=clock) as vault:
            before = ring.reads
            with pytest.raises(IntegrityError):
                call(vault)
            assert ring.reads - before <= 3  # the row's epoch key once, the owner's keyset at most twice


# -- rewrap stopped by a damaged row -------------------------------------------------------------------------------
def summaries_seen(vault, ids) -> dict[str, tuple]:
    return {row: (vault.get(ALICE, row).summary, vault.get(ALICE, row).retained) for row in ids}


def envelopes(attacker) -> dict[int, tuple]:
    """Every row's key version, wrapped key and summary, by seq."""
    summaries = attacker.summaries()
    return {seq: (row["key_version"], row["wrapped_key"], summaries[seq]) for seq, row in attacker.rows().items()}


def test_rewrap_stopped_by_a_damaged_summary_names_the_row_and_finishes_once_it_is_deleted(vault, attacker,
                                                                                         caplog):
    rows = [vault.put(ALICE, "t", n, "x", f"row {n}").id for n in range(5)]
    damaged = rows[2]
    attacker.flip_at(attacker.seq_of(damaged), "summary", 20)
    vault.rotate_owner_key("alice")
    failures = vault.stats()["counters"]["integrity_failures"]
    with caplog.at_level(logging.WARNING, logger="scratchvault"), pytest.raises(IntegrityError) as raised:
        vault.rewrap("alice")
    assert damaged in str(raised.value) and "its owner can delete it" in str(raised.value)
    assert damaged in caplog.text
    assert vault.stats()["counters"]["integrity_failures"] == failures + 1
    assert set(attacker.key_versions()) == {1}  # the batch rolled back
    with pytest.raises(IntegrityError):
        vault.get(ALICE, damaged)
    vault.delete(ALICE, damaged)  # delete opens only the metadata, which is intact
    assert vault.rewrap("alice") == 4
    assert vault.retire_old_key_versions("alice") == 1
    assert [rep.id for rep in vault.list_for_turn(ALICE, "t")] == [r for r in rows if r != damaged]


def test_a_tampered_summary_stops_rewrap_and_rolls_its_batch_back(vault, attacker):
    rows = [vault.put(ALICE, "t", n, "x", f"row {n}").id for n in range(4)]
    bad = vault.put(ALICE, "bad", 1, "x", "tampered").id
    listing, seen = vault.list_for_turn(ALICE, "t"), summaries_seen(vault, rows)
    bad_seq = attacker.seq_of(bad)
    before = envelopes(attacker)
    attacker.flip(bad_seq, "summary", 0.5)
    vault.rotate_owner_key("alice")
    with pytest.raises(IntegrityError):
        vault.rewrap("alice")
    after = envelopes(attacker)
    assert {s: e for s, e in after.items() if s != bad_seq} == {s: e for s, e in before.items() if s != bad_seq}
    assert {attacker.read(attacker.seq_of(row), "key_version") for row in [*rows, bad]} == {1}
    assert vault.list_for_turn(ALICE, "t") == listing and summaries_seen(vault, rows) == seen
    with pytest.raises(IntegrityError):
        vault.get(ALICE, bad)
    with pytest.raises(IntegrityError):
        vault.list_for_turn(ALICE, "bad")


def test_rewrap_stopped_by_a_damaged_wrapped_key_finishes_once_the_row_expires_and_is_collected(vault, attacker,
                                                                                                 clock):
    """A row whose wrapped key was altered cannot be opened, not even to delete it: rewrap names it, and the
    way out without a backup is its expiry and gc (as README and threat_model.md say)."""
    keep = [vault.put(ALICE, "t", n, "x", f"row {n}", ttl_seconds=7200).id for n in range(3)]
    damaged = vault.put(ALICE, "t", 9, "x", "short-lived", ttl_seconds=60).id
    attacker.flip_at(attacker.seq_of(damaged), "wrapped_key", -1)
    vault.rotate_owner_key("alice")
    with pytest.raises(IntegrityError) as raised:
        vault.rewrap("alice")
    assert damaged in str(raised.value) and "gc removes it once it expires" in str(raised.value)
    with pytest.raises(IntegrityError):
        vault.delete(ALICE, damaged)
    assert attacker.counts()[0] == 4
    clock.advance(61)
    assert vault.gc() == 1
    assert vault.rewrap("alice") == 3 and vault.retire_old_key_versions("alice") == 1
    assert [rep.id for rep in vault.list_for_turn(ALICE, "t")] == keep


# -- stored values of the wrong kind -------------------------------------------------------------------------------
READERS = {  # part: (its chunk, the calls that read it)
    "summary": (None, ("get", "list")), "metadata": (None, ("get", "read")), "first_chunk": (0, ("get", "read"))}


@pytest.mark.parametrize("part", READERS)
def test_text_stored_where_bytes_belong_is_an_integrity_error_that_quotes_nothing(vault, attacker, part):
    row = vault.put(ALICE, "t", 1, "x", "content " * 100).id
    chunk, readers = READERS[part]
    stored = "chunk" if chunk is not None else part
    attacker.write(attacker.seq_of(row), stored, b"\xff\xfeQUOTED-MARKER", chunk, as_text=True)
    calls = {"get": lambda: vault.get(ALICE, row), "list": lambda: vault.list_for_turn(ALICE, "t"),
             "read": lambda: vault.read(ALICE, row, "head", n=10)}
    for name in readers:
        with pytest.raises(IntegrityError) as raised:  # not StorageError, and not SQLite's message quoting it
            calls[name]()
        assert "MARKER" not in str(raised.value) and "\\x" not in str(raised.value)
    assert attacker.counts()[0] == 1  # nothing deleted


def sealed_as_format_1(vault, attacker, row: str, plain: bytes) -> tuple[int, bytes]:
    """A format 1 summary of ``plain`` for ``row``, sealed the way format 1 sealed it (by an older writer), stored
    over the row's summary; returns (the row's seq, the sealed summary)."""
    seq = attacker.seq_of(row)
    columns = attacker.row(seq)
    version = columns["key_version"]
    context = RowContext(vault._keys.vault_id, bytes.fromhex(row))
    data_key = vault._recipe.data_key("alice", context.row_id, columns["owner_tag"], version, columns["expires_at"],
                                    columns["wrapped_key"])
    sealed = data_key._seal_with_nonce(b"\x03" + bytes(11), plain, summary_aad(
        context, columns["owner_tag"], columns["turn_tag"], columns["expires_at"], columns["size_bytes"]))
    attacker.write(seq, "summary", sealed)
    return seq, sealed


@pytest.mark.parametrize("change", [
    {"size_units": "12"}, {"step_num": -1}, {"content_kind": "exe"}, {"retained": ["not", "a", "dict"]},
    {"retained": "DEEP"}, {"summary": 7}, {"created_at": "now"},
])
def test_format_1_summary_with_fields_of_the_wrong_type_is_an_integrity_error_everywhere(vault, attacker, clock,
                                                                                        keyring_backend, change):
    row = vault.put(ALICE, "t", 1, "x", "hello").id
    fields = {"format": 1, "step_num": 1, "executor_name": "x", "content_kind": "text", "size_units": 5,
              "created_at": clock.now, "summary": "text: hello", "retained": {"chars": 5}, **change}
    plain = json.dumps(fields).encode().replace(b'"DEEP"', b"[" * 5000 + b"]" * 5000)  # nested past recursion
    seq, sealed = sealed_as_format_1(vault, attacker, row, plain)
    for call in (lambda: vault.list_for_turn(ALICE, "t"), lambda: vault.get(ALICE, row),
                 lambda: vault.extend_turn(ALICE, "t", 7200)):
        with pytest.raises(IntegrityError):
            call()
    assert attacker.read(seq, "summary") == sealed  # never rewritten


def test_a_well_typed_format_1_summary_still_lists_and_extends(vault, attacker, clock):
    row = vault.put(ALICE, "t", 1, "x", "hello").id
    plain = json.dumps({"format": 1, "step_num": 1, "executor_name": "x", "content_kind": "text", "size_units": 5,
                        "created_at": clock.now, "summary": "text, 5 chars: hello", "retained": {"chars": 5}})
    seq, _ = sealed_as_format_1(vault, attacker, row, plain.encode())
    assert [rep.summary for rep in vault.list_for_turn(ALICE, "t")] == ["text, 5 chars: hello"]
    assert vault.extend_turn(ALICE, "t", 7200) == 1
    assert attacker.read(seq, "summary")[0] == 0x05
    assert [rep.summary for rep in vault.list_for_turn(ALICE, "t")] == ["text, 5 chars: hello"]
