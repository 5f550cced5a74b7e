"""A put's write: the disk reserve checked, the owner's keyset, then one write transaction that takes the row's seq,
checks the owner's quotas, seals and inserts its chunks as they are cut (the store checking the reserve as they go),
then its envelope and summary (all or nothing: a killed or refused put leaves no half row)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any

from keys import EPOCH_CLOSED, KeyManager, NewRow, OwnerKeyset, RowRecipe, RowWriter
from vault.errors import KeyUnavailable, StorageError
from vault.model import Principal, Representation, representation
from vault.quotas import OwnerQuotas
from vault.row.chunks import Chunk, classify, content_chunks
from vault.row.format import Metadata, SummaryRecord
from vault.row.json_values import encode_json
from vault.row.summaries import SummaryBuilder
from vault.storage import Store, StoredRow, WriteTx

KEYSET_ATTEMPTS = 3  # a put whose owner's keys change under it this often in a row gives up

def write_row(store: Store, keys: KeyManager, rows: RowRecipe, guard: AbstractContextManager[None],
              quotas: OwnerQuotas, principal: Principal, turn_id: str, step_num: int, executor_name: str,
              observation: Any, created_at: float, expires_at: float) -> Representation:
    """Store one observation (its other inputs validated; ``guard`` around its transaction); returns what the
    model sees of it. QuotaExceeded, nothing stored, past the disk reserve or the owner's quotas."""
    kind = classify(observation)
    source = encode_json(observation) if kind == "json" else observation
    chunks = content_chunks(source, kind != "binary", store.max_chunks)
    store.check_space(_known_size(source))  # before the write lock, and before a new owner's first key is made
    try:
        return _write_row(store, keys, rows, guard, quotas, principal, turn_id, step_num, executor_name, kind,
                          observation if kind == "json" else None, chunks, created_at, expires_at)
    except StorageError:  # refused, or the disk filled: what the rolled-back row wrote to the log goes
        store.scrub()
        raise


def _write_row(store: Store, keys: KeyManager, rows: RowRecipe, guard: AbstractContextManager[None],
               quotas: OwnerQuotas, principal: Principal, turn_id: str, step_num: int, executor_name: str, kind: str,
               json_value: Any, chunks: Iterator[Chunk], created_at: float, expires_at: float) -> Representation:
    """The row's keyset, then its one write transaction: quotas under the write lock, chunks, envelope, summary."""
    user_id = principal.user_id
    index = keys.index_key()
    owner_tag = index.owner_tag(user_id)
    turn_tag = index.turn_tag(owner_tag, turn_id)
    summary = SummaryBuilder(kind, json_value)
    epoch = rows.epoch_for(expires_at, created_at)  # made, if new, before the write lock (keys/epoch_entries.py)
    for attempt in range(KEYSET_ATTEMPTS):
        keyset = _keyset(store, keys, user_id, owner_tag, refresh=attempt > 0)
        with guard, store.transaction() as tx:
            seq, recorded, epoch_recorded = tx.next_row(owner_tag, keyset.primary, epoch.epoch)
            if not rows.epoch_recorded(epoch, epoch_recorded):
                raise KeyUnavailable(EPOCH_CLOSED)
            if not keys.is_current(keyset, recorded):  # retired, shredded or re-created elsewhere: nothing is
                continue  # written yet, and a keyset is never made inside this transaction (keys/manager.py)
            admitted = quotas.admit(tx, owner_tag, chunks)
            row_id = index.row_id(seq)  # the id names the seq, so it is made under the write lock
            writer = rows.writer(keyset, NewRow(user_id, owner_tag, row_id, turn_id, step_num, executor_name, kind),
                                 epoch)
            chunk_units, size_bytes = _insert_chunks(tx, seq, writer, admitted, summary)
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


def _known_size(source: Any) -> int:
    """What an observation's size is known to be before it is cut: a str's length (its UTF-8 is no shorter), a
    bytes-like's bytes; 0 for a stream."""
    if isinstance(source, str):
        return len(source)
    if isinstance(source, bytes | bytearray | memoryview):
        try:
            return memoryview(source).nbytes
        except ValueError:  # a released view: refused (InvalidArgument) when it is cut
            return 0
    return 0


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
