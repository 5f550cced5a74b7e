"""Every AAD and the context digest keep the documented field encoding ``label || (len32 || field)*``
(keys/crypto/encoding.py) whatever the sizes of their fields: the packed fast paths for the usual sizes (16-byte ids,
32-byte tags and digests) and the per-turn builders a listing uses give exactly the bytes of the general encoding,
and any other size falls back to it, so two rows, owners or turns never share an AAD by a packing accident."""

from __future__ import annotations

import hashlib
import struct

import pytest

from keys.crypto.encoding import encode_fields, u64
from keys.crypto.labels import CHUNK_V1, CONTEXT_V1, META_V1, SUMMARY_V1, SUMMARY_V2, SUMMARY_V3, WRAP_V1, WRAP_V3
from keys.formats import stream, v1, v2, v3
from keys.formats.context import Columns, RowContext

EXPIRES_AT, SIZE, VERSION, EPOCH = 1_700_000_123.5, 77, 3, (3600, 472_222)
# (vault id, row id, owner tag, turn tag) lengths: the usual ones, then each field one byte off either way
SIZES = [(16, 16, 32, 32), (15, 16, 32, 32), (17, 16, 32, 32), (16, 15, 32, 32), (16, 17, 32, 32),
         (16, 16, 31, 32), (16, 16, 33, 32), (16, 16, 32, 31), (16, 16, 32, 33), (0, 0, 0, 0)]


def fields(sizes: tuple[int, int, int, int]) -> tuple[bytes, bytes, bytes, bytes]:
    return tuple(bytes([n + 1]) * size for n, size in enumerate(sizes))  # type: ignore[return-value]


def clear_columns(label: bytes, sizes: tuple[int, int, int, int], *tail: bytes) -> bytes:
    vault_id, row_id, owner_tag, turn_tag = fields(sizes)
    return encode_fields(label, vault_id, row_id, owner_tag, turn_tag, struct.pack(">d", EXPIRES_AT), u64(SIZE),
                         *tail)


@pytest.mark.parametrize("sizes", SIZES)
def test_metadata_and_format_1_summary_aads_are_the_field_encoding_of_the_clear_columns(sizes):
    vault_id, row_id, owner_tag, turn_tag = fields(sizes)
    ctx = RowContext(vault_id, row_id)
    assert v1.meta_aad(ctx, owner_tag, turn_tag, EXPIRES_AT, SIZE) == clear_columns(META_V1, sizes)
    assert v1.summary_aad(ctx, owner_tag, turn_tag, EXPIRES_AT, SIZE) == clear_columns(SUMMARY_V1, sizes)


@pytest.mark.parametrize("sizes", SIZES)
def test_format_2_summary_aads_one_row_or_a_whole_turn_are_the_field_encoding(sizes):
    vault_id, row_id, owner_tag, turn_tag = fields(sizes)
    expected = clear_columns(SUMMARY_V2, sizes, u64(VERSION))
    assert v2.summary_aad_v2(RowContext(vault_id, row_id), owner_tag, turn_tag, EXPIRES_AT, SIZE, VERSION) == expected
    assert v2.summary_aads_v2(vault_id, owner_tag, turn_tag)(row_id, EXPIRES_AT, SIZE, VERSION) == expected


@pytest.mark.parametrize("sizes", SIZES)
def test_format_3_summary_aads_one_row_or_a_whole_turn_are_the_field_encoding(sizes):
    vault_id, row_id, owner_tag, turn_tag = fields(sizes)
    expected = clear_columns(SUMMARY_V3, sizes, u64(VERSION), u64(EPOCH[0]), u64(EPOCH[1]))
    row = Columns(row_id, owner_tag, turn_tag, SIZE)
    assert v3.summary_aad_v3(RowContext(vault_id, row_id), row, EXPIRES_AT, VERSION, EPOCH) == expected
    per_turn = v3.summary_aads_v3(vault_id, owner_tag, turn_tag)
    assert per_turn(row_id, EXPIRES_AT, SIZE, VERSION, *EPOCH) == expected


@pytest.mark.parametrize("sizes", SIZES)
def test_wrap_aads_bind_vault_row_owner_version_and_epoch(sizes):
    vault_id, row_id, _, _ = fields(sizes)
    ctx = RowContext(vault_id, row_id)
    assert v1.wrap_aad(ctx, "alice", VERSION) == encode_fields(WRAP_V1, vault_id, row_id, b"alice", u64(VERSION))
    assert v3.wrap_aad_v3(ctx, "alice", VERSION, *EPOCH) == encode_fields(
        WRAP_V3, vault_id, row_id, b"alice", u64(VERSION), u64(EPOCH[0]), u64(EPOCH[1]))


@pytest.mark.parametrize("sizes", SIZES)
@pytest.mark.parametrize("digest_size", [32, 31, 33])
def test_chunk_aads_are_the_field_encoding_of_row_and_context_digest(sizes, digest_size):
    vault_id, row_id, _, _ = fields(sizes)
    digest = bytes([9]) * digest_size
    assert stream.chunk_aad(RowContext(vault_id, row_id), digest) == encode_fields(CHUNK_V1, vault_id, row_id, digest)


@pytest.mark.parametrize(("user", "turn", "step", "executor", "kind"),
                         [("alice", "t-1", 0, "planner", "text"), ("", "", 2**64 - 1, "", ""),
                          ("bö", "turn/ü", 7, "tool:x", "bytes")])
def test_the_context_digest_is_sha256_of_the_encoded_context(user, turn, step, executor, kind):
    expected = hashlib.sha256(encode_fields(CONTEXT_V1, user.encode(), turn.encode(), u64(step), executor.encode(),
                                            kind.encode())).digest()
    assert stream.context_digest(user, turn, step, executor, kind) == expected
