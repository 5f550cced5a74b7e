"""A put's write: the owner's keyset, then one write transaction that takes the row's seq, seals and inserts its
chunks as they are cut, then its envelope and summary (all or nothing: a killed put leaves no half row)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any

from keys import KeyManager, OwnerKeyset, RowRecipe, RowWriter
from vault.errors import KeyUnavailable
from vault.model import Principal, Representation, representation
from vault.row.chunks import Chunk
from vault.row.format import Metadata, SummaryRecord
from vault.row.summaries import SummaryBuilder
from vault.storage import Store, StoredRow, WriteTx

KEYSET_ATTEMPTS = 3  # a put whose owner's keys change under it this often in a row gives up


def write_row(store: Store, keys: KeyManager, rows: RowRecipe, guard: AbstractContextManager[None],
              principal: Principal, turn_id: str, step_num: int, executor_name: str, kind: str, json_value: Any,
              chunks: Iterator[Chunk], created_at: float, expires_at: float) -> Representation:
    """Store one row of validated inputs (``guard`` around its transaction); returns what the model sees of it."""
    user_id = principal.user_id
    index = keys.index_key()
    owner_tag = index.owner_tag(user_id)
    turn_tag = index.turn_tag(owner_tag, turn_id)
    summary = SummaryBuilder(kind, json_value)
    for attempt in range(KEYSET_ATTEMPTS):
        keyset = _keyset(store, keys, user_id, owner_tag, refresh=attempt > 0)
        with guard, store.transaction() as tx:
            seq, recorded = tx.next_row(owner_tag, keyset.primary)
            if not keys.is_current(keyset, recorded):  # retired, shredded or re-created elsewhere: nothing is
                continue  # written yet, and a keyset is never made inside this transaction (keys/manager.py)
            row_id = index.row_id(seq)  # the id names the seq, so it is made under the write lock
            writer = rows.writer(keyset, user_id, row_id, turn_id, step_num, executor_name, kind)
            chunk_units, size_bytes = _insert_chunks(tx, seq, writer, chunks, summary)
            summary_text, retained = summary.finish()
            size_units = sum(chunk_units)
            metadata = Metadata(user_id, principal.actor, principal.channel, turn_id, step_num, executor_name, kind,
                                size_bytes, size_units, tuple(chunk_units), created_at, expires_at)
            record = SummaryRecord(step_num, executor_name, kind, size_units, created_at, summary_text, retained)
            wrapped, sealed_metadata, sealed_summary = writer.finish(owner_tag, turn_tag, expires_at, size_bytes,
                                                                     metadata.encode(), record.encode())
            tx.insert_row(StoredRow(seq, row_id, owner_tag, turn_tag, writer.key_version, expires_at, size_bytes,
                                    wrapped, sealed_metadata), sealed_summary)
        return representation(row_id, size_bytes, expires_at, step_num, executor_name, kind, size_units,
                              created_at, summary_text, retained)
    raise KeyUnavailable("this owner's keys changed on every attempt of this put (rotated, retired or shredded "
                         "elsewhere meanwhile); nothing was stored, retry")


def _keyset(store: Store, keys: KeyManager, user_id: str, owner_tag: bytes, refresh: bool) -> OwnerKeyset:
    """The owner's keyset (cached unless ``refresh``), else a first one for an owner with none: made outside any
    transaction, since its version is reserved in one of its own first (keys/manager.py)."""
    keyset = keys.owner_keyset(user_id, refresh=refresh)
    if keyset is not None:
        return keyset
    return keys.create_owner_keyset(user_id, lambda tag: _owner_has_rows(store, tag))


def _owner_has_rows(store: Store, owner_tag: bytes) -> bool:
    with store.snapshot() as reads:
        return reads.owner_has_rows(owner_tag)


def _insert_chunks(tx: WriteTx, seq: int, writer: RowWriter, chunks: Iterator[Chunk],
                   summary: SummaryBuilder) -> tuple[list[int], int]:
    """Seal and insert each chunk as it is cut, feeding the summary; returns the chunks' units and the bytes."""
    chunk_units: list[int] = []
    size_bytes = 0
    for index, chunk in enumerate(chunks):
        tx.insert_chunk(seq, index, writer.seal_chunk(chunk.data, chunk.last))
        summary.feed(chunk)
        chunk_units.append(chunk.units)
        size_bytes += len(chunk.data)
    return chunk_units, size_bytes
