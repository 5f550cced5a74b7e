"""A put's write: the disk reserve checked, the owner's keyset, then one write transaction that takes the row's seq,
checks the owner's quotas, seals and inserts its chunks as they are cut (the store checking the reserve as they go),
then its envelope and summary (all or nothing: a killed or refused put leaves no half row)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from keys import EPOCH_CLOSED, KeyManager, NewRow, OwnerKeyset, RowRecipe, RowWriter
from vault.counters import Counters
from vault.errors import KeyUnavailable, StorageError
from vault.model import Principal, Representation, representation
from vault.quotas import OwnerQuotas
from vault.row.chunks import Chunk, classify, content_chunks
from vault.row.format import Metadata, SummaryRecord
from vault.row.json_values import encode_json
from vault.row.summaries import SummaryBuilder
from vault.storage import RowKey, Store, StoredRow, WriteTx

KEYSET_ATTEMPTS = 3  # a put whose owner's keys change under it this often in a row gives up


@dataclass(frozen=True)
class PutRequest:
    """One observation to store, its inputs already validated, with the moment of the put and its expiry."""

    principal: Principal
    turn_id: str
    step_num: int
    executor_name: str
    observation: Any
    created_at: float
    expires_at: float


class _Content(NamedTuple):
    """An observation classified and cut: its kind, its JSON value (None unless ``json``), its chunks."""

    kind: str
    json_value: Any
    chunks: Iterator[Chunk]


class PutWriter:
    """Writes a vault's rows: made once per vault over its store, keys, row recipe, counters and quotas."""

    def __init__(self, store: Store, keys: KeyManager, recipe: RowRecipe, counters: Counters,
                 quotas: OwnerQuotas) -> None:
        self._store, self._keys, self._recipe, self._counters, self._quotas = store, keys, recipe, counters, quotas

    def write(self, request: PutRequest) -> Representation:
        """Store one observation; returns what the model sees of it. QuotaExceeded, nothing stored, past the disk
        reserve or the owner's quotas."""
        observation = request.observation
        kind = classify(observation)
        source = encode_json(observation) if kind == "json" else observation
        chunks = content_chunks(source, kind != "binary", self._store.max_chunks)
        self._store.check_space(_known_size(source))  # before the write lock, and before a new owner's first key
        try:
            return self._write(request, _Content(kind, observation if kind == "json" else None, chunks))
        except StorageError:  # refused, or the disk filled: what the rolled-back row wrote to the log goes
            self._store.scrub()
            raise

    def _write(self, request: PutRequest, content: _Content) -> Representation:
        """The row's keyset, then its one write transaction: quotas under the write lock, chunks, envelope,
        summary (all or nothing)."""
        store, keys, recipe = self._store, self._keys, self._recipe
        user_id, turn_id, expires_at = request.principal.user_id, request.turn_id, request.expires_at
        index = keys.index_key()
        owner_tag = index.owner_tag(user_id)
        turn_tag = index.turn_tag(owner_tag, turn_id)
        summary = SummaryBuilder(content.kind, content.json_value)
        epoch = recipe.epoch_for(expires_at, request.created_at)  # made, if new, before the write lock
        for attempt in range(KEYSET_ATTEMPTS):
            keyset = _keyset(store, keys, user_id, owner_tag, refresh=attempt > 0)
            with self._counters.integrity_guard(), store.transaction() as tx:
                seq, recorded, epoch_recorded = tx.next_seq_and_commitments(owner_tag, keyset.primary, epoch.epoch)
                if not recipe.epoch_recorded(epoch, epoch_recorded):
                    raise KeyUnavailable(EPOCH_CLOSED)
                if not keys.is_current(keyset, recorded):  # retired, shredded or re-created elsewhere: nothing is
                    continue  # written yet, and a keyset is never made inside this transaction (keys/manager.py)
                admitted = self._quotas.admit(tx, owner_tag, content.chunks)
                row_id = index.row_id(seq)  # the id names the seq, so it is made under the write lock
                writer = recipe.writer(keyset, NewRow(user_id, owner_tag, row_id, turn_id, request.step_num,
                                                      request.executor_name, content.kind), epoch)
                chunk_units, size_bytes = _insert_chunks(tx, RowKey(owner_tag, seq), writer, admitted, summary)
                summary_text, retained = summary.finish()
                record = SummaryRecord(request.step_num, request.executor_name, content.kind, sum(chunk_units),
                                       request.created_at, summary_text, retained)
                wrapped, sealed_metadata, sealed_summary = writer.finish(
                    owner_tag, turn_tag, expires_at, size_bytes,
                    _metadata(request, record, tuple(chunk_units), size_bytes).encode(), record.encode())
                tx.insert_row(StoredRow(seq, row_id, owner_tag, turn_tag, writer.key_version, expires_at,
                                        size_bytes, wrapped, sealed_metadata), sealed_summary)
            return representation(row_id, size_bytes, expires_at, record.fields())
        raise KeyUnavailable("this owner's keys changed on every attempt of this put (rotated, retired or "
                             "shredded elsewhere meanwhile); nothing was stored, retry")


def _metadata(request: PutRequest, record: SummaryRecord, chunk_units: tuple[int, ...], size_bytes: int) -> Metadata:
    """The row's metadata record: who put it, where, and how its content is cut."""
    principal = request.principal
    return Metadata(principal.user_id, principal.actor, principal.channel, request.turn_id, request.step_num,
                    request.executor_name, record.content_kind, size_bytes, record.size_units, chunk_units,
                    request.created_at, request.expires_at)


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


def _insert_chunks(tx: WriteTx, row: RowKey, writer: RowWriter, chunks: Iterator[Chunk],
                   summary: SummaryBuilder) -> tuple[list[int], int]:
    """Seal and insert each chunk as it is cut, feeding the summary; returns the chunks' units and the bytes."""
    chunk_units: list[int] = []
    size_bytes = 0
    for index, chunk in enumerate(chunks):
        tx.insert_chunk(row, index, writer.seal_chunk(chunk.data, chunk.last))
        summary.feed(chunk)
        chunk_units.append(chunk.units)
        size_bytes += len(chunk.data)
    return chunk_units, size_bytes
