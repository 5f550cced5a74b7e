"""The row recipe (keys/recipe.py) on its own, as age's stream tests do: the chunk writer's invariants, and the
chunk reader refusing a missing, extra, reordered, resized, truncated or foreign chunk before returning any of
its bytes."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from keys import CHUNK_BYTES, NewRow, OwnerKeyset, RowRecipe, SealingEpoch
from keys.epochs.epoch_key import EpochKey
from keys.formats.context import Columns, RowContext
from keys.formats.v3 import summary_aad_v3, summary_aads_v3
from vault import IntegrityError

VAULT_ID, ROW_ID, OTHER_ROW = bytes(range(16)), bytes(16), b"\x01" * 16
OWNER_TAG, TURN_TAG = b"o" * 32, b"t" * 32
PIECES = [b"a" * CHUNK_BYTES, b"b" * CHUNK_BYTES, b"c" * 100]


EPOCH_KEY = EpochKey.generate()
EXPIRES = 2e9
EPOCH = SealingEpoch((3600, int(EXPIRES) // 3600), EPOCH_KEY)


class OneOwner:
    """What the recipe asks of a key manager, for one owner's keyset and one expiry epoch's key."""

    def __init__(self, keyset: OwnerKeyset) -> None:
        self.vault_id, self.keyset = VAULT_ID, keyset
        self.epochs = SimpleNamespace(get=lambda epoch: EPOCH_KEY if epoch == EPOCH.epoch else None)

    def keyset_for_read(self, user_id: str, version: int) -> OwnerKeyset:
        return self.keyset

    def owner_keyset(self, user_id: str, *, refresh: bool = False) -> OwnerKeyset:
        return self.keyset


def sealed_row(recipe: RowRecipe, keyset: OwnerKeyset, row_id: bytes = ROW_ID, kind: str = "binary"):
    """A row of three chunks as put seals it: (the stored row, its sealed chunks, its metadata facts)."""
    writer = recipe.writer(keyset, NewRow("alice", OWNER_TAG, row_id, "turn", 1, "tool", kind), EPOCH)
    chunks = [writer.seal_chunk(piece, index == len(PIECES) - 1) for index, piece in enumerate(PIECES)]
    wrapped, metadata, _ = writer.finish(OWNER_TAG, TURN_TAG, EXPIRES, sum(map(len, PIECES)), b"meta", b"summary")
    row = SimpleNamespace(row_id=row_id, owner_tag=OWNER_TAG, turn_tag=TURN_TAG, key_version=keyset.primary,
                          expires_at=EXPIRES, size_bytes=sum(map(len, PIECES)), wrapped_key=wrapped, metadata=metadata)
    facts = SimpleNamespace(user_id="alice", turn_id="turn", step_num=1, executor_name="tool", content_kind=kind,
                            chunk_units=tuple(map(len, PIECES)))
    return row, chunks, facts


@pytest.fixture
def recipe_and_keyset():
    keyset = OwnerKeyset.generate()
    return RowRecipe(OneOwner(keyset)), keyset


def read(opened, pairs, first, last, facts) -> list[bytes]:
    return [bytes(view) for view in opened.chunks(iter(pairs), first, last, facts)]


def test_chunks_open_back_in_order_and_a_slice_opens_only_its_chunks(recipe_and_keyset):
    recipe, keyset = recipe_and_keyset
    row, chunks, facts = sealed_row(recipe, keyset)
    opened = recipe.open("alice", row)
    assert opened.metadata == b"meta"
    assert read(opened, enumerate(chunks), 0, 2, facts) == PIECES
    assert read(opened, [(1, chunks[1])], 1, 1, facts) == [PIECES[1]]


@pytest.mark.parametrize("attack", ["missing", "extra", "reordered", "truncated", "resized", "foreign", "flipped"])
def test_a_damaged_chunk_sequence_is_an_integrity_error(recipe_and_keyset, attack):
    recipe, keyset = recipe_and_keyset
    row, chunks, facts = sealed_row(recipe, keyset)
    _, foreign, _ = sealed_row(recipe, keyset, OTHER_ROW)
    pairs, first, last = list(enumerate(chunks)), 0, 2
    if attack == "missing":
        del pairs[1]
    elif attack == "extra":
        pairs, last = list(enumerate(chunks)), 1  # the store hands out chunk 2 as well
    elif attack == "reordered":
        pairs = [(0, chunks[1]), (1, chunks[0]), (2, chunks[2])]
    elif attack == "truncated":  # the row said to end at chunk 1: its nonce does not carry the last flag
        facts.chunk_units, pairs, last = facts.chunk_units[:2], pairs[:2], 1
    elif attack == "resized":
        pairs[2] = (2, chunks[2] + b"\x00")
    elif attack == "foreign":
        pairs[1] = (1, foreign[1])
    else:
        pairs[0] = (0, bytes([chunks[0][0] ^ 1]) + chunks[0][1:])
    opened = recipe.open("alice", row)
    returned = []
    with pytest.raises(IntegrityError):
        for view in opened.chunks(iter(pairs), first, last, facts):
            returned.append(bytes(view))
    assert len(returned) <= last - first + 1  # never a byte past the slice
    assert all(piece == PIECES[index] for index, piece in enumerate(returned, start=first))  # nor an altered one


def test_the_writer_refuses_a_chunk_after_the_last_and_a_row_without_one(recipe_and_keyset):
    recipe, keyset = recipe_and_keyset
    writer = recipe.writer(keyset, NewRow("alice", OWNER_TAG, ROW_ID, "turn", 1, "tool", "text"), EPOCH)
    writer.seal_chunk(b"only", True)
    with pytest.raises(IntegrityError):
        writer.seal_chunk(b"more", False)
    unfinished = recipe.writer(keyset, NewRow("alice", OWNER_TAG, ROW_ID, "turn", 1, "tool", "text"), EPOCH)
    unfinished.seal_chunk(b"first", False)
    with pytest.raises(IntegrityError):
        unfinished.finish(OWNER_TAG, TURN_TAG, EXPIRES, 5, b"meta", b"summary")


def test_a_wrapped_key_or_metadata_of_another_row_does_not_open(recipe_and_keyset):
    recipe, keyset = recipe_and_keyset
    row, _, _ = sealed_row(recipe, keyset)
    other, _, _ = sealed_row(recipe, keyset, OTHER_ROW)
    for swapped in (dict(wrapped_key=other.wrapped_key), dict(metadata=other.metadata), dict(expires_at=EXPIRES + 1)):
        with pytest.raises(IntegrityError):
            recipe.open("alice", SimpleNamespace(**{**vars(row), **swapped}))


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=16, max_size=16), st.binary(min_size=0, max_size=40), st.binary(min_size=32, max_size=32),
       st.binary(min_size=32, max_size=32), st.floats(min_value=0, max_value=4e9), st.integers(0, 2**63 - 1),
       st.integers(1, 2**31 - 1), st.integers(60, 86400), st.integers(0, 2**63 - 1))
def test_a_listings_format_3_summary_aad_is_byte_for_byte_the_documented_one(vault_id, row_id, owner, turn, expires,
                                                                             size, version, length, epoch):
    """The per-turn fast path (summary_aads_v3) builds exactly summary_aad_v3's bytes, row ids of any length."""
    fast = summary_aads_v3(vault_id, owner, turn)(row_id, expires, size, version, length, epoch)
    columns = Columns(row_id, owner, turn, size)
    assert fast == summary_aad_v3(RowContext(vault_id, row_id), columns, expires, version, (length, epoch))
