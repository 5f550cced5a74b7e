"""The row recipe: every sealed part of a row is sealed and opened here, and nowhere else.

A row is a random data key (DEK) wrapped under a key derived from the owner's primary key version and the key of
the expiry epoch its expiry falls in (format 3, keys/formats/v3.py); its content as STREAM chunks under the DEK
(keys/formats/stream.py); its metadata record under the DEK; its summary record under the summary key of its owner
key version, turn and epoch. Rows of formats 1 and 2 (wrapped under the owner key alone; summary under the DEK or
the turn key) are still opened; rewrap and extension move them into an epoch. ``vault/`` hands in records as bytes
and the clear columns it stores, and gets records back as bytes: it never builds a nonce or an AAD, and never holds
key bytes. Layouts: ``keys/formats/``; reasons: threat_model.md, "Cryptography" and "Expiry epochs".
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple, Protocol, TypeVar

from keys.epochs.epoch_key import EpochKey
from keys.epochs.schedule import Epoch, epoch_end
from keys.errors import IntegrityError, InvalidArgument, KeyUnavailable, NotFound
from keys.formats.context import Columns, RowContext, SealedRow
from keys.formats.data_key import DataKey
from keys.formats.dispatch import summary_format, wrapped_key_format
from keys.formats.stream import ChunkReader, ChunkWriter, chunk_aad, context_digest
from keys.formats.v1 import meta_aad, summary_aad, wrap_aad
from keys.formats.v3 import SUMMARY_V3, WRAP_V3, OwnerEpochKeys, row_epoch, seal_for_epoch, summary_aad_v3, wrap_aad_v3
from keys.manager import KeyManager
from keys.owner_keyset import OwnerKeyset
from keys.turn_summaries import TurnSummaries, open_stored_v2, open_v3

T = TypeVar("T")
EPOCH_CLOSED = ("the expiry epoch of this row has ended or its key was destroyed by another process: this host's clock "
                "is behind the vault's by more than epoch_skew_seconds. Nothing was stored; correct the clock (or "
                "raise the allowance) and retry")


class RowMetadata(Protocol):
    """What the chunk reader needs of a row's opened metadata record (vault/row/format.py's Metadata)."""

    user_id: str
    turn_id: str
    step_num: int
    executor_name: str
    content_kind: str
    chunk_units: tuple[int, ...]


class SealingEpoch(NamedTuple):
    """The epoch a row is sealed under, with its key (fetched or made outside any write transaction): a new row's,
    or a stored row's on rewrap and extension."""

    epoch: Epoch
    key: EpochKey


@dataclass(frozen=True, slots=True)
class NewRow:
    """A new row's owner, id and immutable context (every chunk is bound to the context)."""

    user_id: str
    owner_tag: bytes
    row_id: bytes
    turn_id: str
    step_num: int
    executor_name: str
    content_kind: str


class RowRecipe:
    """Seals new rows and opens stored ones for one vault; the one place a stale cached keyset is retried."""

    __slots__ = ("_keys", "_now", "vault_id")

    def __init__(self, keys: KeyManager, now: Callable[[], float] = time.time) -> None:
        self._keys, self._now = keys, now
        self.vault_id = keys.vault_id

    def epoch_for(self, expires_at: float, now: float) -> SealingEpoch:
        """The key of the epoch ``expires_at`` falls in, made if it has none (never for an epoch ended at ``now``).
        Called outside any write transaction: a new epoch key is reserved in one of its own first."""
        epoch = self._keys.epochs.epoch_of_expiry(expires_at)
        try:
            return SealingEpoch(epoch, self._keys.epochs.for_put(epoch, now))  # checked again in the write tx
        except InvalidArgument:  # ended or destroyed by the time this runs: nothing is written under it
            raise KeyUnavailable(EPOCH_CLOSED) from None

    def epoch_recorded(self, put: SealingEpoch, recorded: bytes | None) -> bool:
        """Whether ``recorded``, the epoch's key commitment as the writing transaction reads it, is still this key's
        (false once the epoch was closed by any process: a put never wraps under a destroyed key, and the key
        leaves the cache). The commitment names the key, so the attempt is not needed."""
        return self._keys.epochs.still_recorded(put.epoch, put.key, None if recorded is None else (0, recorded))

    def writer(self, keyset: OwnerKeyset, row: NewRow, put: SealingEpoch) -> RowWriter:
        """A writer for a new row under a fresh data key, its chunks bound to the row's immutable context."""
        keys = keyset.epoch_keys(keyset.primary, put.key, self.vault_id, row.owner_tag, put.epoch)
        return RowWriter(keys, row.user_id, RowContext(self.vault_id, row.row_id),
                         context_digest(row.user_id, row.turn_id, row.step_num, row.executor_name, row.content_kind))

    def open(self, user_id: str, row: SealedRow) -> OpenedRow:
        """Unwrap the data key and open the metadata record of a row whose owner was already checked. A row whose
        epoch key was destroyed is NotFound, as an expired row is."""
        context = RowContext(self.vault_id, row.row_id)
        data_key = self.data_key(user_id, row.row_id, row.owner_tag, row.key_version, row.expires_at, row.wrapped_key)
        metadata = data_key.open_metadata(row.metadata, meta_aad(
            context, row.owner_tag, row.turn_tag, row.expires_at, row.size_bytes))
        return OpenedRow(self, user_id, row, data_key, context, metadata)

    def data_key(self, user_id: str, row_id: bytes, owner_tag: bytes, version: int, expires_at: float,
                 wrapped: bytes) -> DataKey:
        """A row's data key, from a wrapped key of format 3 (under its epoch) or format 1 (the owner key alone)."""
        context = RowContext(self.vault_id, row_id)
        if wrapped_key_format(wrapped) == 1:
            aad = wrap_aad(context, user_id, version)
            return self.retrying(user_id, version, lambda keyset: keyset.unwrap(version, wrapped, aad))
        epoch = row_epoch(wrapped, WRAP_V3, expires_at)
        aad = wrap_aad_v3(context, user_id, version, *epoch)
        epoch_key, vault_id = self.epoch_key(epoch), self.vault_id
        return self.retrying(user_id, version, lambda keyset: keyset.epoch_keys(
            version, epoch_key, vault_id, owner_tag, epoch).unwrap(wrapped, aad))

    def epoch_key(self, epoch: Epoch) -> EpochKey:
        """The key of an epoch some stored row names; NotFound once it was destroyed (the row's time is over, and
        this is a copy: a restored backup, or a row written back). An epoch that has not ended and has no key
        never held a row: the row's expiry was altered."""
        found = self._keys.epochs.get(epoch)
        if found is not None:
            return found
        if epoch_end(epoch[1], epoch[0]) > self._now() and not self._keys.epochs.destroyed(epoch):
            raise IntegrityError("a row names an expiry epoch that has no key before its end (its expiry was altered)")
        raise NotFound()

    def turn_summaries(self, user_id: str, owner_tag: bytes, turn_tag: bytes) -> TurnSummaries:
        """Opens the summaries of one owner's turn (a listing), each key derived once per version and epoch."""
        return TurnSummaries(self, user_id, owner_tag, turn_tag)

    def rewrap(self, keyset: OwnerKeyset, user_id: str, row: SealedRow, sealed_summary: bytes | None,
               put: SealingEpoch) -> tuple[bytes, bytes | None]:
        """The row's data key wrapped under the keyset's primary version and ``put``'s epoch (the row's own, if it
        has one: rewrap keeps a row's epoch), and its summary sealed again for both (None: a format 1 summary,
        which the DEK seals, stays). A row whose epoch key is gone is NotFound; one without a summary an
        IntegrityError (OpenedRow.summary)."""
        data_key = self.data_key(user_id, row.row_id, row.owner_tag, row.key_version, row.expires_at,
                                 row.wrapped_key)
        plain, format_1 = OpenedRow(self, user_id, row, data_key, RowContext(self.vault_id, row.row_id),
                                    b"").summary(sealed_summary)
        keys = keyset.epoch_keys(keyset.primary, put.key, self.vault_id, row.owner_tag, put.epoch)
        return seal_for_epoch(keys, user_id, row, row.expires_at, data_key, None if format_1 else plain)

    def keyset_for_read(self, user_id: str, version: int) -> OwnerKeyset:
        """The owner's keyset holding ``version`` (ownership already checked)."""
        return self._keys.keyset_for_read(user_id, version)

    def retrying(self, user_id: str, version: int, attempt: Callable[[OwnerKeyset], T]) -> T:
        """``attempt(keyset)`` (an open under ``version``) with the owner's cached keyset, and once more with a fresh
        one if it fails: a cached keyset may be stale (another process rotated or retired the owner's keys, or
        shredded and re-created the owner). Only a part that still fails is reported as tampering; a version the
        keyset lacks even after the reload that ``keyset_for_read`` makes is one at once."""
        keyset = self._keys.keyset_for_read(user_id, version)
        if version not in keyset.versions:
            raise IntegrityError("row refers to a key version this owner's keyset does not hold")
        try:
            return attempt(keyset)
        except IntegrityError:
            fresh = self._keys.owner_keyset(user_id, refresh=True)
            if fresh is None:
                raise
            return attempt(fresh)


class RowWriter:
    """Seals one new row: its chunks in order (each exactly once, the last one marked), then its envelope."""

    __slots__ = ("_chunks", "_context", "_data_key", "_keys", "_user_id")

    def __init__(self, keys: OwnerEpochKeys, user_id: str, context: RowContext, digest: bytes) -> None:
        self._keys, self._user_id, self._context = keys, user_id, context
        self._data_key = DataKey.generate()
        self._chunks = ChunkWriter(self._data_key, chunk_aad(context, digest))

    @property
    def key_version(self) -> int:
        """The owner key version the row's data key is wrapped under."""
        return self._keys.version

    def seal_chunk(self, data: bytes | memoryview, last: bool) -> bytes:
        """Seal the next chunk; its position and whether it is the last are in its nonce."""
        return self._chunks.seal(data, last)

    def finish(self, owner_tag: bytes, turn_tag: bytes, expires_at: float, size_bytes: int, metadata: bytes,
               summary: bytes) -> tuple[bytes, bytes, bytes]:
        """(wrapped data key, sealed metadata, sealed summary), each bound to the row's clear columns."""
        if not self._chunks.ended:
            raise IntegrityError("a row can't end without a marked last chunk")
        row = Columns(self._context.row_id, owner_tag, turn_tag, size_bytes)
        wrapped, sealed_summary = seal_for_epoch(self._keys, self._user_id, row, expires_at, self._data_key, summary)
        sealed_metadata = self._data_key.seal_metadata(
            metadata, meta_aad(self._context, owner_tag, turn_tag, expires_at, size_bytes))
        return wrapped, sealed_metadata, sealed_summary


class OpenedRow:
    """A stored row whose data key is unwrapped: reads its chunks and summary, seals it again on extension."""

    __slots__ = ("_context", "_data_key", "_recipe", "_row", "_user_id", "metadata")

    def __init__(self, recipe: RowRecipe, user_id: str, row: SealedRow, data_key: DataKey, context: RowContext,
                 metadata: bytes) -> None:
        self._recipe, self._user_id, self._row = recipe, user_id, row
        self._data_key, self._context = data_key, context
        self.metadata = metadata  # the metadata record, authenticated

    def chunks(self, sealed: Iterable[tuple[int, bytes]], first: int, last: int,
               metadata: RowMetadata) -> Iterator[memoryview]:
        """Open chunks ``first..last`` from ``sealed`` (index, blob) pairs in order (``ChunkReader.open``: a view is
        valid only until the next is asked for), bound to the row's immutable context its metadata records."""
        aad = chunk_aad(self._context, context_digest(metadata.user_id, metadata.turn_id, metadata.step_num,
                                                      metadata.executor_name, metadata.content_kind))
        reader = ChunkReader(self._data_key, aad, metadata.chunk_units, metadata.content_kind == "binary")
        return reader.open(sealed, first, last)

    def summary(self, sealed: bytes | None) -> tuple[bytes, bool]:
        """The summary record and whether it is of format 1 (JSON, under the DEK; format 2: under the turn key;
        format 3: under the turn and epoch key)."""
        row, recipe = self._row, self._recipe
        sealed = sealed or b""
        found = summary_format(sealed)
        if found == 3:
            epoch = row_epoch(sealed, SUMMARY_V3, row.expires_at)
            aad = summary_aad_v3(self._context, row, row.expires_at, row.key_version, epoch)
            turn = (row.owner_tag, row.turn_tag, epoch)
            return open_v3(recipe, self._user_id, row.key_version, turn, sealed, aad)[0], False
        if found == 2:
            return open_stored_v2(recipe, self._user_id, self._context, row, sealed), False
        return self._data_key.open_summary(sealed, summary_aad(
            self._context, row.owner_tag, row.turn_tag, row.expires_at, row.size_bytes)), True

    def reseal(self, expires_at: float, metadata: bytes, summary: bytes,
               put: SealingEpoch) -> tuple[bytes, bytes, bytes]:
        """(wrapped key, metadata, summary) sealed again for a new expiry, which is in every aad: the data key
        wrapped under the row's key version and the new expiry's epoch, the summary in format 3 whatever it was."""
        row = self._row
        keyset = self._recipe.keyset_for_read(self._user_id, row.key_version)
        keys = keyset.epoch_keys(row.key_version, put.key, self._context.vault_id, row.owner_tag, put.epoch)
        wrapped, sealed_summary = seal_for_epoch(keys, self._user_id, row, expires_at, self._data_key, summary)
        sealed_metadata = self._data_key.seal_metadata(
            metadata, meta_aad(self._context, row.owner_tag, row.turn_tag, expires_at, row.size_bytes))
        return wrapped, sealed_metadata, sealed_summary

