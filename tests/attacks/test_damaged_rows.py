"""Damage an operator has to act on: a row whose summary was altered stops rewrap with its id and a remedy;
text stored where the vault keeps bytes is an IntegrityError that quotes nothing; a format 1 record with
fields of the wrong type (sealed by an older writer) is an IntegrityError, never another exception."""

from __future__ import annotations

import json
import logging
import sqlite3
from contextlib import closing

import pytest

from keys.envelope import RowContext, summary_aad, wrap_aad
from vault import IntegrityError, Principal

ALICE = Principal("alice")


def sql(db_path, statement: str, *args) -> list[tuple]:
    with closing(sqlite3.connect(db_path)) as conn, conn:
        return conn.execute(statement, args).fetchall()


def test_rewrap_stopped_by_a_damaged_summary_names_the_row_and_finishes_once_it_is_deleted(vault, db_path,
                                                                                         caplog):
    rows = [vault.put(ALICE, "t", n, "x", f"row {n}").id for n in range(5)]
    damaged = rows[2]
    seq = sql(db_path, "SELECT seq FROM rows WHERE id = ?", bytes.fromhex(damaged))[0][0]
    sealed = bytearray(sql(db_path, "SELECT sealed FROM summaries WHERE seq = ?", seq)[0][0])
    sealed[20] ^= 0x01
    sql(db_path, "UPDATE summaries SET sealed = ? WHERE seq = ?", bytes(sealed), seq)
    vault.rotate_owner_key("alice")
    failures = vault.stats()["counters"]["integrity_failures"]
    with caplog.at_level(logging.WARNING, logger="scratchvault"), pytest.raises(IntegrityError) as raised:
        vault.rewrap("alice")
    assert damaged in str(raised.value) and "its owner can delete it" in str(raised.value)
    assert damaged in caplog.text
    assert vault.stats()["counters"]["integrity_failures"] == failures + 1
    assert sql(db_path, "SELECT DISTINCT key_version FROM rows") == [(1,)]  # the batch rolled back
    with pytest.raises(IntegrityError):
        vault.get(ALICE, damaged)
    vault.delete(ALICE, damaged)  # delete opens only the metadata, which is intact
    assert vault.rewrap("alice") == 4
    assert vault.retire_old_key_versions("alice") == 1
    assert [rep.id for rep in vault.list_for_turn(ALICE, "t")] == [r for r in rows if r != damaged]


def test_rewrap_stopped_by_a_damaged_wrapped_key_finishes_once_the_row_expires_and_is_collected(vault, db_path,
                                                                                                 clock):
    """A row whose wrapped key was altered cannot be opened, not even to delete it: rewrap names it, and the
    way out without a backup is its expiry and gc (as README and threat_model.md say)."""
    keep = [vault.put(ALICE, "t", n, "x", f"row {n}", ttl_seconds=7200).id for n in range(3)]
    damaged = vault.put(ALICE, "t", 9, "x", "short-lived", ttl_seconds=60).id
    wrapped = bytearray(sql(db_path, "SELECT wrapped_key FROM rows WHERE id = ?", bytes.fromhex(damaged))[0][0])
    wrapped[-1] ^= 0x01
    sql(db_path, "UPDATE rows SET wrapped_key = ? WHERE id = ?", bytes(wrapped), bytes.fromhex(damaged))
    vault.rotate_owner_key("alice")
    with pytest.raises(IntegrityError) as raised:
        vault.rewrap("alice")
    assert damaged in str(raised.value) and "gc removes it once it expires" in str(raised.value)
    with pytest.raises(IntegrityError):
        vault.delete(ALICE, damaged)
    assert sql(db_path, "SELECT count(*) FROM rows") == [(4,)]
    clock.advance(61)
    assert vault.gc() == 1
    assert vault.rewrap("alice") == 3 and vault.retire_old_key_versions("alice") == 1
    assert [rep.id for rep in vault.list_for_turn(ALICE, "t")] == keep


READERS = {  # which calls read which column
    "summaries.sealed": ("get", "list"), "rows.metadata": ("get", "read"), "chunks.sealed": ("get", "read")}


@pytest.mark.parametrize("column", READERS)
def test_text_stored_where_bytes_belong_is_an_integrity_error_that_quotes_nothing(vault, db_path, column):
    row = vault.put(ALICE, "t", 1, "x", "content " * 100).id
    seq = sql(db_path, "SELECT seq FROM rows WHERE id = ?", bytes.fromhex(row))[0][0]
    table, name = column.split(".")
    key, value = ("pos", seq << 20) if table == "chunks" else ("seq", seq)
    sql(db_path, f"UPDATE {table} SET {name} = CAST(? AS TEXT) WHERE {key} = ?", b"\xff\xfeQUOTED-MARKER", value)
    calls = {"get": lambda: vault.get(ALICE, row), "list": lambda: vault.list_for_turn(ALICE, "t"),
             "read": lambda: vault.read(ALICE, row, "head", n=10)}
    for name in READERS[column]:
        with pytest.raises(IntegrityError) as raised:  # not StorageError, and not SQLite's message quoting it
            calls[name]()
        assert "MARKER" not in str(raised.value) and "\\x" not in str(raised.value)
    assert sql(db_path, "SELECT count(*) FROM rows") == [(1,)]  # nothing deleted


@pytest.mark.parametrize("change", [
    {"size_units": "12"}, {"step_num": -1}, {"content_kind": "exe"}, {"retained": ["not", "a", "dict"]},
    {"retained": "DEEP"}, {"summary": 7}, {"created_at": "now"},
])
def test_format_1_summary_with_fields_of_the_wrong_type_is_an_integrity_error_everywhere(vault, db_path, clock,
                                                                                        keyring_backend, change):
    row = vault.put(ALICE, "t", 1, "x", "hello").id
    seq, version, expires, size, turn_tag, owner_tag = sql(
        db_path, "SELECT seq, key_version, expires_at, size_bytes, turn_tag, owner_tag FROM rows WHERE id = ?",
        bytes.fromhex(row))[0]
    wrapped = sql(db_path, "SELECT wrapped_key FROM rows WHERE seq = ?", seq)[0][0]
    keyset = vault._keys.owner_keyset("alice")  # an older writer's record, sealed the way format 1 sealed it
    context = RowContext(vault._keys.vault_id, bytes.fromhex(row))
    data_key = keyset.unwrap(version, wrapped, wrap_aad(context, "alice", version))
    fields = {"format": 1, "step_num": 1, "executor_name": "x", "content_kind": "text", "size_units": 5,
              "created_at": clock.now, "summary": "text: hello", "retained": {"chars": 5}, **change}
    plain = json.dumps(fields).encode().replace(b'"DEEP"', b"[" * 5000 + b"]" * 5000)  # nested past recursion
    sealed = data_key._seal_with_nonce(b"\x03" + bytes(11), plain, summary_aad(context, owner_tag, turn_tag,
                                                                                expires, size))
    sql(db_path, "UPDATE summaries SET sealed = ? WHERE seq = ?", sealed, seq)
    for call in (lambda: vault.list_for_turn(ALICE, "t"), lambda: vault.get(ALICE, row),
                 lambda: vault.extend_turn(ALICE, "t", 7200)):
        with pytest.raises(IntegrityError):
            call()
    assert sql(db_path, "SELECT sealed FROM summaries WHERE seq = ?", seq) == [(sealed,)]  # never rewritten


def test_a_well_typed_format_1_summary_still_lists_and_extends(vault, db_path, clock):
    row = vault.put(ALICE, "t", 1, "x", "hello").id
    seq, version, expires, size, turn_tag, owner_tag, wrapped = sql(
        db_path, "SELECT seq, key_version, expires_at, size_bytes, turn_tag, owner_tag, wrapped_key FROM rows "
                 "WHERE id = ?", bytes.fromhex(row))[0]
    keyset = vault._keys.owner_keyset("alice")
    context = RowContext(vault._keys.vault_id, bytes.fromhex(row))
    data_key = keyset.unwrap(version, wrapped, wrap_aad(context, "alice", version))
    plain = json.dumps({"format": 1, "step_num": 1, "executor_name": "x", "content_kind": "text", "size_units": 5,
                        "created_at": clock.now, "summary": "text, 5 chars: hello", "retained": {"chars": 5}})
    sealed = data_key._seal_with_nonce(b"\x03" + bytes(11), plain.encode(),
                                       summary_aad(context, owner_tag, turn_tag, expires, size))
    sql(db_path, "UPDATE summaries SET sealed = ? WHERE seq = ?", sealed, seq)
    assert [rep.summary for rep in vault.list_for_turn(ALICE, "t")] == ["text, 5 chars: hello"]
    assert vault.extend_turn(ALICE, "t", 7200) == 1
    assert sql(db_path, "SELECT sealed FROM summaries WHERE seq = ?", seq)[0][0][0] == 0x04
    assert [rep.summary for rep in vault.list_for_turn(ALICE, "t")] == ["text, 5 chars: hello"]
