"""Summary format 2: the AAD fast paths equal the general layout, the binary SummaryRecord round-trips and
rejects damage, attacks on stored format 2 summaries are detected, rotation re-seals them, a stale keyset in
another Vault is reloaded (not reported as tampering), and the representation builder equals Representation's
constructor."""

from __future__ import annotations

import dataclasses
import sqlite3
import struct
from contextlib import closing

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from keys.envelope import RowContext, encode_fields, meta_aad, summary_aad, summary_aad_v2, summary_aads_v2
from vault import IntegrityError, Principal, Representation, Vault
from vault.model import representation
from vault.row.format import _SUMMARY_HEADER, KINDS, SummaryRecord

ALICE, BOB = Principal("alice"), Principal("bob")
U64 = st.integers(0, 2**64 - 1)
FINITE = st.floats(allow_nan=False, allow_infinity=False)
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=30)  # valid Unicode, non-ASCII included


def sized(*sizes: int) -> st.SearchStrategy[bytes]:
    return st.sampled_from(sizes).flatmap(lambda n: st.binary(min_size=n, max_size=n))


IDS, TAGS = sized(16, 16, 16, 0, 1, 15, 17, 33), sized(32, 32, 32, 0, 1, 16, 31, 33, 64)  # usual sizes and not

# -- 1. AADs ---------------------------------------------------------------------------------------------
@settings(max_examples=300, deadline=None)
@given(vault_id=IDS, owner=TAGS, turn=TAGS,
       rows=st.lists(st.tuples(IDS, FINITE, U64, U64), min_size=1, max_size=4))
@example(vault_id=b"v" * 16, owner=b"o" * 32, turn=b"t" * 32,
         rows=[(b"r" * 16, -0.0, 0, 1), (b"", -1e300, 2**64 - 1, 0)])
def test_meta_summary_and_v2_aads_equal_the_general_length_prefixed_layout(vault_id, owner, turn, rows):
    builder = summary_aads_v2(vault_id, owner, turn)  # one builder per turn, reused for each of its rows
    for row_id, expires, size, version in rows:
        clear = (vault_id, row_id, owner, turn, struct.pack(">d", expires), struct.pack(">Q", size))
        ctx = RowContext(vault_id, row_id)
        assert meta_aad(ctx, owner, turn, expires, size) == encode_fields(b"scratchvault/meta/v1", *clear)
        assert summary_aad(ctx, owner, turn, expires, size) == encode_fields(b"scratchvault/summary/v1", *clear)
        expected = encode_fields(b"scratchvault/summary/v2", *clear, struct.pack(">Q", version))
        assert summary_aad_v2(ctx, owner, turn, expires, size, version) == expected
        assert builder(row_id, expires, size, version) == expected


# -- 2. the binary summary record ------------------------------------------------------------------------
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), FINITE, TEXT)
RECORDS = st.builds(
    SummaryRecord, step_num=st.one_of(st.integers(0, 2**53 - 1), st.just(2**53 - 1)), executor_name=TEXT,
    content_kind=st.sampled_from(KINDS), size_units=U64, created_at=FINITE, summary=TEXT,
    retained=st.dictionaries(TEXT, SCALARS, max_size=6))


def decoded_or_integrity_error(raw: bytes) -> None:
    """Decoding never raises anything but IntegrityError; what it returns is a well-typed record."""
    try:
        record = SummaryRecord.decode(raw)
    except IntegrityError:
        return
    assert record.content_kind in KINDS and type(record.retained) is dict and type(record.step_num) is int
    assert isinstance(record.summary, str) and isinstance(record.executor_name, str)


@settings(max_examples=300, deadline=None)
@given(RECORDS)
@example(SummaryRecord(2**53 - 1, "", "json", 0, -0.0, "", {}))
@example(SummaryRecord(7, "wéb", "text", 3, 1.5, "ünï € 😀\n…", {"": None, "é": "😀", "t": True, "f": 0.1, "n": -9}))
def test_summary_record_round_trips_every_valid_record(record):
    decoded = SummaryRecord.decode(record.encode())
    assert decoded == record
    assert [(k, type(v)) for k, v in decoded.retained.items()] == [(k, type(v)) for k, v in record.retained.items()]


@settings(max_examples=300, deadline=None)
@given(record=RECORDS, data=st.data())
def test_summary_record_decode_of_damaged_encodings_is_integrity_error_or_a_record(record, data):
    raw = record.encode()
    with pytest.raises(IntegrityError):
        SummaryRecord.decode(raw[:data.draw(st.integers(0, len(raw) - 1))])  # truncated
    with pytest.raises(IntegrityError):
        SummaryRecord.decode(raw + data.draw(st.binary(min_size=1, max_size=8)))  # extended
    fields, body = list(_SUMMARY_HEADER.unpack_from(raw)), raw[_SUMMARY_HEADER.size:]
    bad_format, bad_kind = data.draw(st.integers(0, 255).filter(lambda v: v != 2)), data.draw(st.integers(3, 255))
    for at, value in ((0, bad_format), (4, bad_kind)):
        with pytest.raises(IntegrityError):  # unknown format byte, unknown kind
            SummaryRecord.decode(_SUMMARY_HEADER.pack(*fields[:at], value, *fields[at + 1:]) + body)
    fields[5:] = data.draw(st.lists(st.integers(0, 2**32 - 1) | st.integers(0, 40), min_size=3, max_size=3))
    decoded_or_integrity_error(_SUMMARY_HEADER.pack(*fields) + body)  # wrong lengths
    flipped = bytearray(raw)
    flipped[data.draw(st.integers(0, len(raw) - 1))] ^= data.draw(st.integers(1, 255))
    decoded_or_integrity_error(bytes(flipped))


RETAINED_BYTES = st.one_of(st.binary(max_size=40), TEXT.map(str.encode), st.sampled_from(
    [b"{}", b"[]", b" {}", b"{} ", b"{", b'{"a":NaN}', b'{"a":1e400}', b'{"a":' + b"9" * 5000 + b"}", b"[" * 50_000,
     b'{"a":"\\ud800"}', b'{"a":1,"a":2}', b"\xff", b"null", b'"x"']))


@settings(max_examples=300, deadline=None)
@given(raw=st.binary(max_size=120), parts=st.tuples(st.binary(max_size=12), st.binary(max_size=12), RETAINED_BYTES),
       kind=st.integers(0, 3))
def test_summary_record_decode_of_arbitrary_bytes_is_integrity_error_or_a_record(raw, parts, kind):
    decoded_or_integrity_error(raw)
    header = _SUMMARY_HEADER.pack(2, 1, 2, 3.0, kind, *map(len, parts))  # consistent lengths, arbitrary bytes
    decoded_or_integrity_error(header + b"".join(parts))


# -- 3. attacks on stored format 2 summaries -------------------------------------------------------------
def sql(db_path, statement: str, *args) -> list[tuple]:
    with closing(sqlite3.connect(db_path)) as conn, conn:
        return conn.execute(statement, args).fetchall()


def seq_of(db_path, row: str) -> int:
    return sql(db_path, "SELECT seq FROM rows WHERE id = ?", bytes.fromhex(row))[0][0]


def summary_blob(db_path, row: str) -> bytes:
    return sql(db_path, "SELECT sealed FROM summaries WHERE seq = ?", seq_of(db_path, row))[0][0]


def set_summary(db_path, row: str, blob: bytes) -> None:
    sql(db_path, "UPDATE summaries SET sealed = ? WHERE seq = ?", blob, seq_of(db_path, row))


def key_version(db_path, row: str) -> int:
    return sql(db_path, "SELECT key_version FROM rows WHERE id = ?", bytes.fromhex(row))[0][0]


def put_world(vault) -> dict[str, str]:
    return {"t1": vault.put(ALICE, "t", 1, "web.fetch", "alice's first page " * 50).id,
            "t2": vault.put(ALICE, "t", 2, "ls", {"entries": [1, 2, 3], "count": 3, "status": "ok"}).id,
            "u1": vault.put(ALICE, "u", 1, "download", bytes(range(256))).id,
            "bob": vault.put(BOB, "t", 1, "web.fetch", "bob's page").id}


def move(source: str, target: str):
    return lambda vault, db, ids: set_summary(db, ids[target], summary_blob(db, ids[source]))


def downgrade(vault, db, ids):  # format 2's first byte 0x04 made format 1's nonce domain 0x03
    set_summary(db, ids["t1"], b"\x03" + summary_blob(db, ids["t1"])[1:])


def rollback_across_rewrap(vault, db, ids):
    old = summary_blob(db, ids["t1"])
    vault.rotate_owner_key("alice")
    assert vault.rewrap("alice") == 3 and key_version(db, ids["t1"]) == 2
    set_summary(db, ids["t1"], old)


def new_version_column(version: int):
    def attack(vault, db, ids):
        vault.rotate_owner_key("alice")  # versions 1 and 2 both held; the row stays under 1
        sql(db, "UPDATE rows SET key_version = ? WHERE id = ?", version, bytes.fromhex(ids["t1"]))
    return attack


ATTACKS = {  # name: (attack, target row, owner and turn of the target)
    "downgrade_0x04_to_0x03": (downgrade, "t1", ALICE, "t"),
    "moved_within_turn": (move("t1", "t2"), "t2", ALICE, "t"),
    "moved_to_other_turn": (move("t1", "u1"), "u1", ALICE, "u"),
    "moved_to_other_owner": (move("t1", "bob"), "bob", BOB, "t"),
    "pre_rewrap_summary_written_back": (rollback_across_rewrap, "t1", ALICE, "t"),
    "key_version_column_to_held_version": (new_version_column(2), "t1", ALICE, "t"),
    "key_version_column_to_unknown_version": (new_version_column(9), "t1", ALICE, "t"),
}


@pytest.mark.parametrize("name", ATTACKS)
def test_tampered_format_2_summary_is_integrity_error_counted_and_never_deletes(vault, db_path, name):
    attack, target, owner, turn = ATTACKS[name]
    ids = put_world(vault)
    listings = {(p, t): vault.list_for_turn(p, t) for p in (ALICE, BOB) for t in ("t", "u")}
    seq = seq_of(db_path, ids[target])
    assert summary_blob(db_path, ids[target])[0] == 0x04
    attack(vault, db_path, ids)
    failures = vault.stats()["counters"]["integrity_failures"]
    with pytest.raises(IntegrityError):
        vault.list_for_turn(owner, turn)
    with pytest.raises(IntegrityError):
        vault.get(owner, ids[target])
    assert vault.stats()["counters"]["integrity_failures"] == failures + 2
    assert sql(db_path, "SELECT count(*) FROM rows JOIN summaries USING (seq) WHERE seq = ?", seq) == [(1,)]
    for (p, t), listing in listings.items():  # every other listing is untouched
        if (p, t) != (owner, turn):
            assert vault.list_for_turn(p, t) == listing


# -- 4. rotation, rewrap, retirement ---------------------------------------------------------------------
def summaries_seen(vault, ids) -> dict[str, tuple]:
    return {row: (vault.get(ALICE, row).summary, vault.get(ALICE, row).retained) for row in ids}


def test_rewrap_reseals_old_version_summaries_and_retirement_changes_nothing_visible(vault, db_path, keyring_backend):
    old = [*list(put_world(vault).values())[:3], vault.put(ALICE, "t", 3, "x", {"total": 2**53, "items": []}).id]
    assert vault.rotate_owner_key("alice") == 2
    new = [vault.put(ALICE, turn, 9, "y", f"after rotation {turn}").id for turn in ("t", "u")]
    lists = {turn: vault.list_for_turn(ALICE, turn) for turn in ("t", "u")}
    seen = summaries_seen(vault, old + new)
    blobs = {row: summary_blob(db_path, row) for row in old + new}
    assert {row: key_version(db_path, row) for row in old + new} == {**dict.fromkeys(old, 1), **dict.fromkeys(new, 2)}
    assert vault.rewrap("alice") == len(old)
    assert vault.retire_old_key_versions("alice") == 1
    assert all(summary_blob(db_path, row) != blobs[row] for row in old)  # re-sealed under version 2's turn key
    assert all(summary_blob(db_path, row) == blobs[row] for row in new)  # already under the primary: untouched
    assert all(blob[0] == 0x04 for (blob,) in sql(db_path, "SELECT sealed FROM summaries"))
    assert {key_version(db_path, row) for row in old + new} == {2}
    with Vault.open(db_path, keyring_backend=keyring_backend) as fresh:  # and without any cached key
        for reader in (vault, fresh):
            assert {turn: reader.list_for_turn(ALICE, turn) for turn in ("t", "u")} == lists
            assert summaries_seen(reader, old + new) == seen
    assert vault.stats()["counters"]["integrity_failures"] == 0


def test_a_tampered_summary_stops_rewrap_and_rolls_its_batch_back(vault, db_path):
    rows = [vault.put(ALICE, "t", n, "x", f"row {n}").id for n in range(4)]
    bad = vault.put(ALICE, "bad", 1, "x", "tampered").id
    listing, seen = vault.list_for_turn(ALICE, "t"), summaries_seen(vault, rows)
    before = sql(db_path, "SELECT seq, key_version, wrapped_key, sealed FROM rows JOIN summaries USING (seq)")
    blob = bytearray(summary_blob(db_path, bad))
    blob[len(blob) // 2] ^= 0x01
    set_summary(db_path, bad, bytes(blob))
    vault.rotate_owner_key("alice")
    with pytest.raises(IntegrityError):
        vault.rewrap("alice")
    after = sql(db_path, "SELECT seq, key_version, wrapped_key, sealed FROM rows JOIN summaries USING (seq)")
    assert [r for r in after if r[0] != seq_of(db_path, bad)] == [r for r in before if r[0] != seq_of(db_path, bad)]
    assert {key_version(db_path, row) for row in [*rows, bad]} == {1}
    assert vault.list_for_turn(ALICE, "t") == listing and summaries_seen(vault, rows) == seen
    with pytest.raises(IntegrityError):
        vault.get(ALICE, bad)
    with pytest.raises(IntegrityError):
        vault.list_for_turn(ALICE, "bad")


# -- 5. a stale keyset in another Vault ------------------------------------------------------------------
@pytest.fixture
def shredded_elsewhere(db_path, keyring_backend):
    """Vault ``stale`` caches alice's keyset; ``other`` shreds her and stores rows under her new version 1."""
    with Vault.open(db_path, keyring_backend=keyring_backend) as stale, \
            Vault.open(db_path, keyring_backend=keyring_backend) as other:
        old = stale.put(ALICE, "t", 1, "x", "under the shredded key").id
        assert [rep.id for rep in stale.list_for_turn(ALICE, "t")] == [old]
        other.shred_owner("alice")
        yield stale, other, [other.put(ALICE, "t", n, "x", f"under the new key, {n}").id for n in range(2, 6)]


def test_a_stale_cached_keyset_is_reloaded_for_a_listing_not_reported_as_tampering(shredded_elsewhere):
    stale, other, fresh = shredded_elsewhere
    listing = stale.list_for_turn(ALICE, "t")
    assert listing == other.list_for_turn(ALICE, "t")
    assert [rep.id for rep in listing] == fresh
    assert stale.get(ALICE, fresh[0]).content == "under the new key, 2"
    assert stale.list_for_turn(ALICE, "t") == listing
    assert stale.stats()["counters"]["integrity_failures"] == 0


def test_a_stale_cached_keyset_is_reloaded_once_per_listing_not_once_per_row(shredded_elsewhere, keyring_backend):
    stale, _, fresh = shredded_elsewhere
    reads = keyring_backend.reads
    assert len(stale.list_for_turn(ALICE, "t")) == len(fresh) == 4
    assert keyring_backend.reads - reads <= 1


# -- 6. the representation builder ------------------------------------------------------------------------
@settings(max_examples=100, deadline=None)
@given(args=st.tuples(st.binary(min_size=16, max_size=16), U64, FINITE, st.integers(0, 2**53 - 1), TEXT,
                      st.sampled_from(KINDS), U64, FINITE, TEXT, st.dictionaries(TEXT, SCALARS, max_size=3)))
def test_the_representation_builder_equals_the_constructor_and_is_frozen(args):
    row_id, size_bytes, expires_at, step, executor, kind, units, created_at, summary, retained = args
    fast = representation(*args)
    fields = (row_id.hex(), kind, size_bytes, summary, fast.ref_hint, step, executor, created_at, expires_at, retained)
    slow = Representation(*fields)
    assert type(fast) is Representation and fast == slow and fast.to_dict() == slow.to_dict()
    assert [getattr(fast, f.name) for f in dataclasses.fields(Representation)] == list(fields)
    assert row_id.hex() in fast.ref_hint and f"{units:,}" in fast.ref_hint
    for name in (f.name for f in dataclasses.fields(Representation)):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(fast, name, 1)
        with pytest.raises(dataclasses.FrozenInstanceError):
            delattr(fast, name)
    for rep in (fast, slow):  # not a field: Python 3.11's slots+frozen __setattr__ raises TypeError, not Frozen...
        with pytest.raises((dataclasses.FrozenInstanceError, TypeError)):
            rep.extra = 1
        assert not hasattr(rep, "__dict__") and not hasattr(rep, "extra")


def test_listed_representations_are_frozen_and_equal_their_constructor_form(vault):
    vault.put(ALICE, "t", 1, "ls", {"entries": [1], "count": 1})
    (rep,) = vault.list_for_turn(ALICE, "t")
    assert rep == Representation(*(getattr(rep, f.name) for f in dataclasses.fields(Representation)))
    with pytest.raises(dataclasses.FrozenInstanceError):
        rep.summary = "forged"
