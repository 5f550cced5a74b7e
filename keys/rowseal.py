"""The row recipe: every sealed part of a row is sealed and opened here, and nowhere else.

A row is a random data key (DEK) wrapped under the owner's primary key version; its content as STREAM chunks
under the DEK; its metadata record under the DEK; its summary record under the turn summary key of the owner's
key version (format 2; a format 1 summary, under the DEK, is still opened). ``vault/`` hands in records as bytes
and the clear columns it stores, and gets records back as bytes: it never builds a nonce or an AAD, and never
holds key bytes. Layout and reasons: ``keys/envelope.py`` and threat_model.md, "Cryptography".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Protocol, TypeVar

from keys.aead import TAG_SIZE
from keys.datakey import DataKey
from keys.envelope import (
    CHUNK_BYTES,
    SUMMARY_V2,
    RowContext,
    chunk_aad,
    context_digest,
    meta_aad,
    summary_aad,
    summary_aad_v2,
    summary_aads_v2,
    wrap_aad,
)
from keys.errors import IntegrityError
from keys.keyset import OwnerKeyset
from keys.manager import KeyManager
from keys.turnkey import TurnKey

T = TypeVar("T")


class SealedRow(Protocol):
    """A row's clear columns and sealed envelope, as a store returns them (the store's row type has these)."""

    row_id: bytes
    owner_tag: bytes
    turn_tag: bytes
    key_version: int
    expires_at: float
    size_bytes: int
    wrapped_key: bytes
    metadata: bytes


class RowMetadata(Protocol):
    """What the chunk reader needs of a row's opened metadata record (vault/row/format.py's Metadata)."""

    user_id: str
    turn_id: str
    step_num: int
    executor_name: str
    content_kind: str
    chunk_units: tuple[int, ...]


class RowRecipe:
    """Seals new rows and opens stored ones for one vault; the one place a stale cached keyset is retried."""

    __slots__ = ("_keys", "vault_id")

    def __init__(self, keys: KeyManager) -> None:
        self._keys = keys
        self.vault_id = keys.vault_id

    def writer(self, keyset: OwnerKeyset, user_id: str, row_id: bytes, turn_id: str, step_num: int,
               executor_name: str, content_kind: str) -> RowWriter:
        """A writer for a new row under a fresh data key, its chunks bound to the row's immutable context."""
        return RowWriter(keyset, user_id, RowContext(self.vault_id, row_id),
                         context_digest(user_id, turn_id, step_num, executor_name, content_kind))

    def open(self, user_id: str, row: SealedRow) -> OpenedRow:
        """Unwrap the data key and open the metadata record of a row whose owner was already checked."""
        context = RowContext(self.vault_id, row.row_id)
        aad = wrap_aad(context, user_id, row.key_version)
        data_key = self.retrying(user_id, row.key_version, OwnerKeyset.unwrap, row.wrapped_key, aad)
        metadata = data_key.open_metadata(row.metadata, meta_aad(
            context, row.owner_tag, row.turn_tag, row.expires_at, row.size_bytes))
        return OpenedRow(self, user_id, row, data_key, context, metadata)

    def turn_summaries(self, user_id: str, owner_tag: bytes, turn_tag: bytes) -> TurnSummaries:
        """Opens the summaries of one owner's turn (a listing), each turn key derived once per version."""
        return TurnSummaries(self, user_id, owner_tag, turn_tag)

    def rewrap(self, keyset: OwnerKeyset, user_id: str, row: SealedRow,
               sealed_summary: bytes | None) -> tuple[bytes, bytes | None]:
        """The row's data key wrapped under the keyset's primary version instead of the row's, and its format 2
        summary sealed again under that version's turn key (None: a format 1 summary, which the DEK seals, stays)."""
        context = RowContext(self.vault_id, row.row_id)
        data_key = keyset.unwrap(row.key_version, row.wrapped_key, wrap_aad(context, user_id, row.key_version))
        wrapped = keyset.wrap(data_key, wrap_aad(context, user_id, keyset.primary))
        if not sealed_summary:
            raise IntegrityError("a row's summary is missing")
        if sealed_summary[0] != SUMMARY_V2:
            return wrapped, None
        old = summary_aad_v2(context, row.owner_tag, row.turn_tag, row.expires_at, row.size_bytes, row.key_version)
        plain = keyset.turn_key(row.key_version, self.vault_id, row.turn_tag).open_summary(sealed_summary, old)
        new = summary_aad_v2(context, row.owner_tag, row.turn_tag, row.expires_at, row.size_bytes, keyset.primary)
        return wrapped, keyset.turn_key(keyset.primary, self.vault_id, row.turn_tag).seal_summary(plain, new)

    def turn_key(self, user_id: str, version: int, turn_tag: bytes) -> TurnKey:
        """The summary key of one of the owner's turns under ``version`` (ownership already checked)."""
        return self._keys.keyset_for_read(user_id, version).turn_key(version, self.vault_id, turn_tag)

    def retrying(self, user_id: str, version: int, attempt: Callable[..., T], *args: bytes) -> T:
        """``attempt(keyset, version, *args)`` (an open) with the owner's cached keyset, and once more with a fresh
        one if it fails: a cached keyset may be stale (shredded and re-created in another process, so versions
        restarted). Only a part that still fails is reported as tampering; a version the keyset lacks even after
        the reload that ``keyset_for_read`` makes is one at once."""
        keyset = self._keys.keyset_for_read(user_id, version)
        if version not in keyset.versions:
            raise IntegrityError("row refers to a key version this owner's keyset does not hold")
        try:
            return attempt(keyset, version, *args)
        except IntegrityError:
            fresh = self._keys.owner_keyset(user_id, refresh=True)
            if fresh is None:
                raise
            return attempt(fresh, version, *args)


class RowWriter:
    """Seals one new row: its chunks in order (each exactly once, the last one marked), then its envelope."""

    __slots__ = ("_aad", "_context", "_data_key", "_ended", "_keyset", "_next", "_user_id")

    def __init__(self, keyset: OwnerKeyset, user_id: str, context: RowContext, digest: bytes) -> None:
        self._keyset, self._user_id, self._context = keyset, user_id, context
        self._data_key = DataKey.generate()
        self._aad = chunk_aad(context, digest)
        self._next, self._ended = 0, False

    @property
    def key_version(self) -> int:
        """The owner key version the row's data key is wrapped under."""
        return self._keyset.primary

    def seal_chunk(self, data: bytes | memoryview, last: bool) -> bytes:
        """Seal the next chunk; its position and whether it is the last are in its nonce."""
        if self._ended:
            raise IntegrityError("a row has no chunk after its last")
        sealed = self._data_key.seal_chunk(self._next, last, data, self._aad)
        self._next += 1
        self._ended = last
        return sealed

    def finish(self, owner_tag: bytes, turn_tag: bytes, expires_at: float, size_bytes: int, metadata: bytes,
               summary: bytes) -> tuple[bytes, bytes, bytes]:
        """(wrapped data key, sealed metadata, sealed summary), each bound to the row's clear columns."""
        if not self._ended:
            raise IntegrityError("a row can't end without a marked last chunk")
        context, primary = self._context, self._keyset.primary
        wrapped = self._keyset.wrap(self._data_key, wrap_aad(context, self._user_id, primary))
        sealed_metadata = self._data_key.seal_metadata(
            metadata, meta_aad(context, owner_tag, turn_tag, expires_at, size_bytes))
        turn_key = self._keyset.turn_key(primary, context.vault_id, turn_tag)
        sealed_summary = turn_key.seal_summary(
            summary, summary_aad_v2(context, owner_tag, turn_tag, expires_at, size_bytes, primary))
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
        """Open chunks ``first..last`` from ``sealed`` (index, blob) pairs in order, each into one reused buffer:
        a view is valid only until the next is asked for. A missing, extra, moved or resized chunk is an
        IntegrityError; so is a chunk of another row, context or position (its AAD or nonce differs)."""
        chunk_units = metadata.chunk_units
        aad = chunk_aad(self._context, context_digest(metadata.user_id, metadata.turn_id, metadata.step_num,
                                                      metadata.executor_name, metadata.content_kind))
        final = len(chunk_units) - 1
        binary = metadata.content_kind == "binary"
        buffer = memoryview(bytearray(CHUNK_BYTES))
        expected = first
        for index, blob in sealed:
            if index != expected:
                raise IntegrityError("a content chunk is missing")
            if index > last:  # a store that hands out more than was asked for: never read past the slice
                raise IntegrityError("a content chunk is extra")
            size = len(blob) - TAG_SIZE
            if not 0 <= size <= CHUNK_BYTES or (binary and size != chunk_units[index]):
                raise IntegrityError("a content chunk has the wrong size")
            out = buffer[:size]
            self._data_key.open_chunk_into(index, index == final, blob, aad, out)
            yield out
            expected += 1
        if expected != last + 1:
            raise IntegrityError("a content chunk is missing")

    def summary(self, sealed: bytes | None) -> tuple[bytes, bool]:
        """The summary record and whether it is of format 1 (JSON, under the DEK; format 2: under the turn key)."""
        row = self._row
        if not sealed:
            raise IntegrityError("a row's summary is missing")
        if sealed[0] != SUMMARY_V2:
            return self._data_key.open_summary(sealed, summary_aad(
                self._context, row.owner_tag, row.turn_tag, row.expires_at, row.size_bytes)), True
        aad = summary_aad_v2(self._context, row.owner_tag, row.turn_tag, row.expires_at, row.size_bytes,
                             row.key_version)
        return self._recipe.retrying(self._user_id, row.key_version, _open_summary, self._context.vault_id,
                                     row.turn_tag, sealed, aad)[0], False

    def reseal(self, expires_at: float, metadata: bytes, summary: bytes) -> tuple[bytes, bytes]:
        """The metadata and summary records sealed again for a new expiry (it is in both AADs), each under a fresh
        random nonce; the summary in format 2 whatever it was, under the turn key of the row's key version."""
        row, context = self._row, self._context
        sealed_metadata = self._data_key.seal_metadata(
            metadata, meta_aad(context, row.owner_tag, row.turn_tag, expires_at, row.size_bytes))
        turn_key = self._recipe.turn_key(self._user_id, row.key_version, row.turn_tag)
        sealed_summary = turn_key.seal_summary(summary, summary_aad_v2(
            context, row.owner_tag, row.turn_tag, expires_at, row.size_bytes, row.key_version))
        return sealed_metadata, sealed_summary


class TurnSummaries:
    """Opens the summaries of one owner's turn: format 2 under the turn key (no unwrap), format 1 under the DEK."""

    __slots__ = ("_aad_of", "_owner_tag", "_recipe", "_turn_keys", "_turn_tag", "_user_id")

    def __init__(self, recipe: RowRecipe, user_id: str, owner_tag: bytes, turn_tag: bytes) -> None:
        self._recipe, self._user_id, self._owner_tag, self._turn_tag = recipe, user_id, owner_tag, turn_tag
        self._aad_of = summary_aads_v2(recipe.vault_id, owner_tag, turn_tag)
        self._turn_keys: dict[int, TurnKey] = {}

    def open(self, row_id: bytes, version: int, expires_at: float, size_bytes: int, sealed: bytes,
             wrapped_key: Callable[[int], bytes], seq: int) -> tuple[bytes, bool]:
        """A listed row's summary record and whether it is of format 1; ``wrapped_key(seq)`` fetches the row's
        wrapped data key, needed only for format 1. (No closure in here: a listing calls it once per row.)"""
        if sealed[0] != SUMMARY_V2:
            return self._open_v1(row_id, version, expires_at, size_bytes, sealed, wrapped_key(seq)), True
        aad = self._aad_of(row_id, expires_at, size_bytes, version)
        cached = self._turn_keys.get(version)
        if cached is not None:
            try:
                return cached.open_summary(sealed, aad), False
            except IntegrityError:
                pass  # opened again below, with a reloaded keyset if this one was stale
        return self._open_v2(version, sealed, aad), False

    def _open_v2(self, version: int, sealed: bytes, aad: bytes) -> bytes:
        """Open under the turn key of a keyset fetched (or reloaded) now, and keep that key for the turn."""
        plain, self._turn_keys[version] = self._recipe.retrying(self._user_id, version, _open_summary,
                                                                self._recipe.vault_id, self._turn_tag, sealed, aad)
        return plain

    def _open_v1(self, row_id: bytes, version: int, expires_at: float, size_bytes: int, sealed: bytes,
                 wrapped: bytes) -> bytes:
        """Open a format 1 summary under the row's DEK (unwrapped with the one retry)."""
        context = RowContext(self._recipe.vault_id, row_id)
        aad = wrap_aad(context, self._user_id, version)
        data_key = self._recipe.retrying(self._user_id, version, OwnerKeyset.unwrap, wrapped, aad)
        return data_key.open_summary(sealed, summary_aad(
            context, self._owner_tag, self._turn_tag, expires_at, size_bytes))


def _open_summary(keyset: OwnerKeyset, version: int, vault_id: bytes, turn_tag: bytes, sealed: bytes,
                  aad: bytes) -> tuple[bytes, TurnKey]:
    """A format 2 summary opened under the turn key ``keyset`` derives, and that key."""
    turn_key = keyset.turn_key(version, vault_id, turn_tag)
    return turn_key.open_summary(sealed, aad), turn_key
