"""Metadata format 2 (binary): every valid record round-trips, every damaged or arbitrary one is an
IntegrityError or a well-formed record (never another exception), and format 1 (JSON) records still parse."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from vault import IntegrityError
from vault.row.format import _META_HEADER, KINDS, Metadata
from vault.storage.sqlite.schema import MAX_CHUNKS

U64 = st.integers(0, 2**64 - 1)
FINITE = st.floats(allow_nan=False, allow_infinity=False)
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=30)  # valid Unicode, non-ASCII included


@st.composite
def records(draw: st.DrawFn) -> Metadata:
    units = draw(st.lists(st.sampled_from([65536, 65535, 1, 0, 4096]), min_size=1, max_size=40))
    return Metadata(
        user_id=draw(TEXT), actor=draw(st.none() | TEXT), channel=draw(st.none() | TEXT), turn_id=draw(TEXT),
        step_num=draw(st.integers(0, 2**53 - 1)), executor_name=draw(TEXT), content_kind=draw(st.sampled_from(KINDS)),
        size_bytes=draw(U64), size_units=sum(units), chunk_units=tuple(units), created_at=draw(FINITE),
        expires_at=draw(FINITE))


def decoded_or_integrity_error(raw: bytes) -> None:
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
    decoded_or_integrity_error(_META_HEADER.pack(*fields) + body)  # wrong lengths and run counts
    flipped = bytearray(raw)
    flipped[data.draw(st.integers(0, len(raw) - 1))] ^= data.draw(st.integers(1, 255))
    decoded_or_integrity_error(bytes(flipped))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
@example(b"{")
@example(b'{"format": 1}')
@example(b"[" * 50_000)
def test_metadata_decode_of_arbitrary_bytes_is_integrity_error_or_a_record(raw):
    decoded_or_integrity_error(raw)


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
