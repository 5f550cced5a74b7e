"""A row's columns as either store reads them back (vault/storage/sql/values.py): a seq outside what the store can
hold, or a column of another type, is tampering, whatever query read it (a lookup, a listing, gc's expiry scan)."""

from __future__ import annotations

import pytest

from vault.errors import IntegrityError
from vault.storage.sql.values import BIGINT_SEQS, stored_row, with_summaries
from vault.storage.sqlite.schema import MAX_SEQ


def columns(seq: object) -> tuple:
    return (seq, b"id", b"owner", b"turn", 1, 1_800_000_000.0, 7, b"wrapped", b"metadata")


@pytest.mark.parametrize("limit", [MAX_SEQ, BIGINT_SEQS], ids=["sqlite", "postgres"])
def test_a_row_at_a_seq_the_store_can_hold_is_read_whole(limit):
    for seq in (1, limit - 1):
        row = stored_row(columns(seq), limit)
        assert (row.seq, row.row_id, row.owner_tag, row.size_bytes) == (seq, b"id", b"owner", 7)
    assert with_summaries([(*columns(2), b"sealed"), (*columns(3), None)], limit) == [
        (stored_row(columns(2), limit), b"sealed"), (stored_row(columns(3), limit), None)]


@pytest.mark.parametrize("limit", [MAX_SEQ, BIGINT_SEQS], ids=["sqlite", "postgres"])
@pytest.mark.parametrize("seq", [0, -1, "limit", "1", 1.0, None, True])
def test_a_row_at_no_seq_the_store_makes_is_tampering(limit, seq):
    with pytest.raises(IntegrityError, match=r"^a stored row has columns of the wrong type$"):
        stored_row(columns(limit if seq == "limit" else seq), limit)
