"""STREAM chunks under one data key (keys/formats/stream.py), its chunk writer and reader, without a Vault: the
nonce at its boundaries, payloads around the chunk size (0, cs-1, cs, cs+1, 2cs+500), and each way a stored
stream can be cut, reordered, extended or moved to another row. Named for the attack each tries."""

from __future__ import annotations

import pytest

from keys.errors import IntegrityError
from keys.formats.context import RowContext
from keys.formats.data_key import DataKey
from keys.formats.stream import (
    CHUNK_BYTES,
    CHUNK_COUNTER_LIMIT,
    ChunkReader,
    ChunkWriter,
    chunk_aad,
    chunk_nonce,
    context_digest,
)

CONTEXT = RowContext(bytes(16), bytes(range(16)))
DIGEST = context_digest("alice", "turn", 1, "tool", "binary")
SIZES = [0, CHUNK_BYTES - 1, CHUNK_BYTES, CHUNK_BYTES + 1, 2 * CHUNK_BYTES + 500]


def split(payload: bytes) -> list[bytes]:
    return [payload[at:at + CHUNK_BYTES] for at in range(0, len(payload), CHUNK_BYTES)] or [b""]


def seal(data_key: DataKey, payload: bytes, context: RowContext = CONTEXT) -> list[tuple[int, bytes]]:
    pieces, writer = split(payload), ChunkWriter(data_key, chunk_aad(context, DIGEST))
    return [(index, writer.seal(piece, index == len(pieces) - 1)) for index, piece in enumerate(pieces)]


def read(data_key: DataKey, payload: bytes, sealed: list[tuple[int, bytes]], first: int = 0,
         last: int | None = None) -> bytes:
    units = tuple(map(len, split(payload)))
    reader = ChunkReader(data_key, chunk_aad(CONTEXT, DIGEST), units, exact_sizes=True)
    last = len(units) - 1 if last is None else last
    return b"".join(bytes(view) for view in reader.open(sealed, first, last))


def test_the_nonce_is_domain_counter_and_last_flag_at_both_ends_of_the_counter():
    assert chunk_nonce(0, False) == b"\x01" + bytes(10) + b"\x00"
    assert chunk_nonce(0, True) == b"\x01" + bytes(10) + b"\x01"
    assert chunk_nonce(CHUNK_COUNTER_LIMIT - 1, True) == b"\x01" + b"\xff" * 10 + b"\x01"
    for index in (-1, CHUNK_COUNTER_LIMIT):
        with pytest.raises(IntegrityError, match=r"^chunk index out of range$"):
            chunk_nonce(index, False)


@pytest.mark.parametrize("size", SIZES)
def test_a_payload_at_each_chunk_boundary_reads_back_whole(size):
    data_key, payload = DataKey.generate(), bytes(range(256)) * (size // 256) + bytes(size % 256)
    sealed = seal(data_key, payload)
    assert len(sealed) == max(1, -(-size // CHUNK_BYTES))
    assert read(data_key, payload, sealed) == payload


def test_a_slice_opens_only_the_chunks_it_touches():
    data_key, payload = DataKey.generate(), b"x" * (2 * CHUNK_BYTES + 500)
    sealed = seal(data_key, payload)
    assert read(data_key, payload, sealed[1:2], first=1, last=1) == payload[CHUNK_BYTES:2 * CHUNK_BYTES]


def test_truncated_stream_whose_last_chunk_is_dropped_fails():
    data_key, payload = DataKey.generate(), b"x" * (CHUNK_BYTES + 1)
    sealed = seal(data_key, payload)
    with pytest.raises(IntegrityError, match=r"^a content chunk is missing$"):
        read(data_key, payload, sealed[:1])


def test_truncated_stream_sealed_as_shorter_fails_on_the_last_flag():
    data_key, payload = DataKey.generate(), b"x" * (CHUNK_BYTES + 1)
    cut = seal(data_key, payload[:CHUNK_BYTES])  # one chunk, marked last
    with pytest.raises(IntegrityError):
        read(data_key, payload, cut + seal(data_key, payload)[1:])


def test_a_stream_missing_a_middle_chunk_fails_naming_it_missing():
    data_key, payload = DataKey.generate(), b"a" * CHUNK_BYTES + b"b" * CHUNK_BYTES + b"c"
    first, _, third = seal(data_key, payload)
    with pytest.raises(IntegrityError, match=r"^a content chunk is missing$"):
        read(data_key, payload, [first, third])


def test_reordered_chunks_fail():
    data_key, payload = DataKey.generate(), b"a" * CHUNK_BYTES + b"b" * CHUNK_BYTES + b"c"
    first, second, third = seal(data_key, payload)
    with pytest.raises(IntegrityError):
        read(data_key, payload, [first, (1, third[1]), (2, second[1])])


def test_extra_chunk_past_the_slice_fails():
    data_key, payload = DataKey.generate(), b"x" * (CHUNK_BYTES + 1)
    with pytest.raises(IntegrityError, match=r"^a content chunk is extra$"):
        read(data_key, payload, seal(data_key, payload), first=0, last=0)


def test_chunk_of_another_row_or_key_fails():
    data_key, payload = DataKey.generate(), b"x" * 10
    moved = seal(data_key, payload, RowContext(bytes(16), bytes(16)))
    with pytest.raises(IntegrityError):
        read(data_key, payload, moved)
    with pytest.raises(IntegrityError):
        read(DataKey.generate(), payload, seal(data_key, payload))


def test_corrupted_chunk_fails():
    data_key, payload = DataKey.generate(), b"x" * 10
    (index, blob), = seal(data_key, payload)
    with pytest.raises(IntegrityError):
        read(data_key, payload, [(index, blob[:-1] + bytes([blob[-1] ^ 1]))])


def test_a_writer_seals_nothing_after_the_marked_last_chunk():
    writer = ChunkWriter(DataKey.generate(), chunk_aad(CONTEXT, DIGEST))
    writer.seal(b"a", False)
    assert not writer.ended
    writer.seal(b"b", True)
    assert writer.ended
    with pytest.raises(IntegrityError, match=r"^a row has no chunk after its last$"):
        writer.seal(b"c", True)


def test_resized_chunk_of_binary_content_fails_before_it_is_opened():
    data_key, payload = DataKey.generate(), b"x" * 10
    reader = ChunkReader(data_key, chunk_aad(CONTEXT, DIGEST), (11,), exact_sizes=True)
    with pytest.raises(IntegrityError, match=r"^a content chunk has the wrong size$"):
        list(reader.open(seal(data_key, payload), 0, 0))
