"""What the store contract's tests share: made-up owner and turn tags, row ids and the seq each names, and rows
and ledgers written as the vault writes them (through the protocols only)."""

from __future__ import annotations

import os

from keys import SealedLedger
from vault.storage import StoredRow

NOW = 1_800_000_000.0
OWNER, OTHER_OWNER = b"o" * 32, b"p" * 32
TURN, OTHER_TURN = b"t" * 32, b"u" * 32


class Ids:
    """Made-up row ids and the seq each names (what ``IndexKey.row_seqs`` tells a listing)."""

    def __init__(self) -> None:
        self.seqs: dict[bytes, int] = {}

    def new(self, seq: int) -> bytes:
        row_id = os.urandom(16)
        self.seqs[row_id] = seq
        return row_id

    def row_seqs(self, row_ids: list[bytes]) -> list[int]:
        return [self.seqs.get(row_id, 0) for row_id in row_ids]


def put(store, ids: Ids, owner: bytes = OWNER, turn: bytes = TURN, expires: float = NOW + 60, version: int = 1,
        chunks: tuple[bytes, ...] = (b"chunk 0",), summary: bytes = b"summary",
        wrapped: bytes = b"wrapped key") -> StoredRow:
    """One row as a put writes it: a seq from next_seq_and_commitments, its chunks, then its row and summary, in
    one transaction."""
    with store.transaction() as tx:
        seq, _, _ = tx.next_seq_and_commitments(owner, version)
        row = StoredRow(seq, ids.new(seq), owner, turn, version, expires, 7, wrapped, b"metadata")
        for index, sealed in enumerate(chunks):
            tx.insert_chunk(row, index, sealed)
        tx.insert_row(row, summary)
    return row


def put_ledger(store, owner: bytes, ledger: SealedLedger) -> None:
    with store.transaction() as tx:
        tx.put_ledger(owner, ledger)
