"""The row's record formats: metadata format 2 (binary) and summary format 2 (binary) round-trip every valid
record, and every damaged or arbitrary encoding is an IntegrityError or a well-formed record (never another
exception); format 1 (JSON) metadata still parses; the AAD fast paths equal the general layout; the representation
built from a summary equals Representation's constructor."""

from __future__ import annotations

import dataclasses
import json
import struct

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from keys.crypto.encoding import encode_fields
from keys.formats.context import RowContext
from keys.formats.v1 import meta_aad, summary_aad
from keys.formats.v2 import summary_aad_v2, summary_aads_v2
from vault import IntegrityError, Principal, Representation
from vault.model import representation
from vault.row.format import _META_HEADER, _SUMMARY_HEADER, KINDS, Metadata, SummaryRecord
from vault.storage.sqlite.schema import MAX_CHUNKS

ALICE = Principal("alice")
U64 = st.integers(0, 2**64 - 1)
FINITE = st.floats(allow_nan=False, allow_infinity=False)
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=30)  # valid Unicode, non-ASCII included


def sized(*sizes: int) -> st.SearchStrategy[bytes]:
    return st.sampled_from(sizes).flatmap(lambda n: st.binary(min_size=n, max_size=n))


IDS, TAGS = sized(16, 16, 16, 0, 1, 15, 17, 33), sized(32, 32, 32, 0, 1, 16, 31, 33, 64)  # usual sizes and not


# -- the metadata record (format 2, binary; format 1 still parsed) ------------------------------------------
@st.composite
def records(draw: st.DrawFn) -> Metadata:
    units = draw(st.lists(st.sampled_from([65536, 65535, 1, 0, 4096]), min_size=1, max_size=40))
    return Metadata(
        user_id=draw(TEXT), actor=draw(st.none() | TEXT), channel=draw(st.none() | TEXT), turn_id=draw(TEXT),
        step_num=draw(st.integers(0, 2**53 - 1)), executor_name=draw(TEXT), content_kind=draw(st.sampled_from(KINDS)),
        size_bytes=draw(U64), size_units=sum(units), chunk_units=tuple(units), created_at=draw(FINITE),
        expires_at=draw(FINITE))


def metadata_or_integrity_error(raw: bytes) -> None:
    try:
        metadata = Metadata.decode(raw, MAX_CHUNKS)
    except IntegrityError:
        return
    assert metadata.content_kind in KINDS and sum(metadata.chunk_units) == metadata.size_units
    assert all(isinstance(name, str) for name in (metadata.user_id, metadata.turn_id, metadata.executor_name))
    assert all(name is None or isinstance(name, str) for name in (metadata.actor, metadata.channel))


@settings(max_examples=300, deadline=None)
@given(records())
@example(Metadata("é", None, "", "t", 2**53 - 1, "", "binary", 2**64 - 1, 131072, (65536, 65536), -0.0, 1e300))
def test_metadata_round_trips_every_valid_record(metadata):
    raw = metadata.encode()
    assert raw[0] == 2 and Metadata.decode(raw, MAX_CHUNKS) == metadata


@settings(max_examples=300, deadline=None)
@given(metadata=records(), data=st.data())
def test_metadata_decode_of_damaged_encodings_is_integrity_error_or_a_record(metadata, data):
    raw = metadata.encode()
    with pytest.raises(IntegrityError):
        Metadata.decode(raw[:data.draw(st.integers(0, len(raw) - 1))], MAX_CHUNKS)  # truncated
    with pytest.raises(IntegrityError):
        Metadata.decode(raw + data.draw(st.binary(min_size=1, max_size=8)), MAX_CHUNKS)  # extended
    fields, body = list(_META_HEADER.unpack_from(raw)), raw[_META_HEADER.size:]
    for at, value in ((0, data.draw(st.integers(0, 255).filter(lambda v: v not in (2, 123)))),
                      (6, data.draw(st.integers(3, 255)))):
        with pytest.raises(IntegrityError):  # unknown format byte, unknown kind
            Metadata.decode(_META_HEADER.pack(*fields[:at], value, *fields[at + 1:]) + body, MAX_CHUNKS)
    fields[7:] = data.draw(st.lists(st.integers(0, 2**32 - 1) | st.integers(0, 40), min_size=6, max_size=6))
    metadata_or_integrity_error(_META_HEADER.pack(*fields) + body)  # wrong lengths and run counts
    flipped = bytearray(raw)
    flipped[data.draw(st.integers(0, len(raw) - 1))] ^= data.draw(st.integers(1, 255))
    metadata_or_integrity_error(bytes(flipped))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
@example(b"{")
@example(b'{"format": 1}')
@example(b"[" * 50_000)
def test_metadata_decode_of_arbitrary_bytes_is_integrity_error_or_a_record(raw):
    metadata_or_integrity_error(raw)


def test_a_run_count_past_the_chunk_limit_is_refused_before_anything_is_allocated():
    raw = Metadata("u", None, None, "t", 1, "x", "text", 1, 1, (1,), 0.0, 1.0).encode()
    fields = list(_META_HEADER.unpack_from(raw))
    fields[-1] = 2**32 - 1
    with pytest.raises(IntegrityError):
        Metadata.decode(_META_HEADER.pack(*fields) + raw[_META_HEADER.size:], MAX_CHUNKS)


def test_format_1_json_records_still_parse():
    metadata = Metadata("alice", "planner", None, "t", 3, "web", "text", 70000, 70000, (65536, 4464), 1.5, 2.5)
    legacy = json.dumps({"format": 1, "user_id": "alice", "actor": "planner", "channel": None, "turn_id": "t",
                         "step_num": 3, "executor_name": "web", "content_kind": "text", "size_bytes": 70000,
                         "size_units": 70000, "chunk_units": [[65536, 1], [4464, 1]], "created_at": 1.5,
                         "expires_at": 2.5}, separators=(",", ":")).encode()
    assert Metadata.decode(legacy, MAX_CHUNKS) == metadata
    with pytest.raises(IntegrityError):  # a format 1 record that says it is another format
        Metadata.decode(legacy.replace(b'"format":1', b'"format":2'), MAX_CHUNKS)


# -- the summary record (format 2, binary) ---------------------------------------------------------------
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), FINITE, TEXT)
RECORDS = st.builds(
    SummaryRecord, step_num=st.one_of(st.integers(0, 2**53 - 1), st.just(2**53 - 1)), executor_name=TEXT,
    content_kind=st.sampled_from(KINDS), size_units=U64, created_at=FINITE, summary=TEXT,
    retained=st.dictionaries(TEXT, SCALARS, max_size=6))


def summary_or_integrity_error(raw: bytes) -> None:
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
    summary_or_integrity_error(_SUMMARY_HEADER.pack(*fields) + body)  # wrong lengths
    flipped = bytearray(raw)
    flipped[data.draw(st.integers(0, len(raw) - 1))] ^= data.draw(st.integers(1, 255))
    summary_or_integrity_error(bytes(flipped))


RETAINED_BYTES = st.one_of(st.binary(max_size=40), TEXT.map(str.encode), st.sampled_from(
    [b"{}", b"[]", b" {}", b"{} ", b"{", b'{"a":NaN}', b'{"a":1e400}', b'{"a":' + b"9" * 5000 + b"}", b"[" * 50_000,
     b'{"a":"\\ud800"}', b'{"a":1,"a":2}', b"\xff", b"null", b'"x"']))


@settings(max_examples=300, deadline=None)
@given(raw=st.binary(max_size=120), parts=st.tuples(st.binary(max_size=12), st.binary(max_size=12), RETAINED_BYTES),
       kind=st.integers(0, 3))
def test_summary_record_decode_of_arbitrary_bytes_is_integrity_error_or_a_record(raw, parts, kind):
    summary_or_integrity_error(raw)
    header = _SUMMARY_HEADER.pack(2, 1, 2, 3.0, kind, *map(len, parts))  # consistent lengths, arbitrary bytes
    summary_or_integrity_error(header + b"".join(parts))


# -- the AADs that bind the records to their row ---------------------------------------------------------
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


# -- the representation a listing builds from a summary ---------------------------------------------------
@settings(max_examples=100, deadline=None)
@given(args=st.tuples(st.binary(min_size=16, max_size=16), U64, FINITE, st.integers(0, 2**53 - 1), TEXT,
                      st.sampled_from(KINDS), U64, FINITE, TEXT, st.dictionaries(TEXT, SCALARS, max_size=3)))
def test_the_representation_builder_equals_the_constructor_and_is_frozen(args):
    row_id, size_bytes, expires_at, step, executor, kind, units, created_at, summary, retained = args
    fast = representation(row_id, size_bytes, expires_at, (step, executor, kind, units, created_at, summary, retained))
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
