"""Opening summaries without a row's data key: a listing opens one turn's summaries under keys derived once per
key version (format 2) or per key version and epoch (format 3), never unwrapping a key per row. A summary of
format 1 (under the DEK) still needs its row's data key. Layouts: keys/formats/v2.py and keys/formats/v3.py."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Protocol, TypeVar

from keys.crypto.aead import NONCE_SIZE, TAG_SIZE, Aead
from keys.epochs.epoch_key import EpochKey
from keys.epochs.schedule import MAX_EPOCH_SECONDS, MIN_EPOCH_SECONDS, Epoch
from keys.errors import IntegrityError, NotFound
from keys.formats.context import RowContext, SealedRow
from keys.formats.data_key import DataKey
from keys.formats.dispatch import summary_format
from keys.formats.v1 import summary_aad
from keys.formats.v2 import TurnKey, summary_aad_v2, summary_aads_v2
from keys.formats.v3 import HEAD_SIZE, SUMMARY_V3, OwnerEpochKeys, row_epoch, summary_aads_v3
from keys.owner_keyset import OwnerKeyset

T = TypeVar("T")
ListedSummary = tuple[int, bytes, int, float, int, bytes]  # (seq, row id, key version, expiry, size, sealed summary)
_LENGTH_OF = struct.Struct(">I").unpack_from  # E, after the format byte
_NONCE, _SEALED = HEAD_SIZE, HEAD_SIZE + NONCE_SIZE
_SMALLEST = _SEALED + TAG_SIZE
_LAST_EXPIRY = 2.0**53  # below it an expiry is a whole-second-exact double and its epoch within range


class RowKeys(Protocol):
    """What opening a summary needs of the row recipe: the keys of a row, with the one retry of a stale keyset."""

    @property
    def vault_id(self) -> bytes: ...

    def retrying(self, user_id: str, version: int, attempt: Callable[[OwnerKeyset], T]) -> T: ...

    def epoch_key(self, epoch: Epoch) -> EpochKey: ...

    def data_key(self, user_id: str, row_id: bytes, owner_tag: bytes, version: int, expires_at: float,
                 wrapped: bytes) -> DataKey: ...


class TurnSummaries:
    """Opens the summaries of one owner's turn: format 3 and 2 under derived keys, format 1 under the DEK."""

    __slots__ = ("_aad_of", "_aad_v3", "_ciphers", "_owner_tag", "_recipe", "_turn_keys", "_turn_tag", "_user_id")

    def __init__(self, recipe: RowKeys, user_id: str, owner_tag: bytes, turn_tag: bytes) -> None:
        self._recipe, self._user_id, self._owner_tag, self._turn_tag = recipe, user_id, owner_tag, turn_tag
        self._aad_of = summary_aads_v2(recipe.vault_id, owner_tag, turn_tag)
        self._aad_v3 = summary_aads_v3(recipe.vault_id, owner_tag, turn_tag)
        self._turn_keys: dict[int, TurnKey] = {}
        self._ciphers: dict[tuple[int, int, int], Aead] = {}  # the turn's summary cipher per (version, E, e)

    def open(self, listed: ListedSummary, wrapped_key: Callable[[int], bytes]) -> tuple[bytes, bool] | None:
        """A listed row's summary record and whether it is of format 1, or None when the row's epoch key was
        destroyed (the row is gone, as an expired one); ``wrapped_key(seq)`` fetches the row's wrapped data key,
        needed only for format 1. (No closure in here: a listing calls it once per row.)"""
        seq, row_id, version, expires_at, size_bytes, sealed = listed
        found = summary_format(sealed)
        try:
            if found == 3:
                return self._open_v3(listed), False
            if found == 1:
                return self._open_v1(listed, wrapped_key(seq)), True
        except NotFound:
            return None
        aad = self._aad_of(row_id, expires_at, size_bytes, version)
        cached = self._turn_keys.get(version)
        if cached is not None:
            try:
                return cached.open_summary(sealed, aad), False
            except IntegrityError:
                pass  # opened again below, with a reloaded keyset if this one was stale
        plain, self._turn_keys[version] = open_v2(self._recipe, self._user_id, version, self._turn_tag, sealed, aad)
        return plain, False

    def _open_v3(self, listed: ListedSummary) -> bytes:
        """Open under the turn's key for the version and epoch, kept for the listing; retried once with a reloaded
        keyset (a stale cached one) before it counts as tampering. A row of an epoch the listing met already costs
        one header read, one aad and one open (a listing opens thousands)."""
        _, row_id, version, expires_at, size_bytes, sealed = listed
        if len(sealed) >= _SMALLEST and 0.0 <= expires_at < _LAST_EXPIRY:
            length = _LENGTH_OF(sealed, 1)[0]
            if MIN_EPOCH_SECONDS <= length <= MAX_EPOCH_SECONDS:
                slot = (version, length, int(expires_at) // length)  # floor: the expiry is not negative
                known = self._ciphers.get(slot)
                if known is not None:
                    try:
                        return known.open(sealed[_NONCE:_SEALED], sealed[_SEALED:], self._aad_v3(
                            row_id, expires_at, size_bytes, version, *slot[1:]))
                    except IntegrityError:
                        pass  # opened again below, with a reloaded keyset if this one was stale
        epoch = row_epoch(sealed, SUMMARY_V3, expires_at)
        aad = self._aad_v3(row_id, expires_at, size_bytes, version, *epoch)
        plain, keys = open_v3(self._recipe, self._user_id, version, (self._owner_tag, self._turn_tag, epoch),
                              sealed, aad)
        self._ciphers[(version, *epoch)] = keys.turn_cipher(self._turn_tag)
        return plain

    def _open_v1(self, listed: ListedSummary, wrapped: bytes) -> bytes:
        """Open a format 1 summary under the row's DEK (unwrapped, under its epoch if it has one)."""
        _, row_id, version, expires_at, size_bytes, sealed = listed
        data_key = self._recipe.data_key(self._user_id, row_id, self._owner_tag, version, expires_at, wrapped)
        return data_key.open_summary(sealed, summary_aad(
            RowContext(self._recipe.vault_id, row_id), self._owner_tag, self._turn_tag, expires_at, size_bytes))


def open_v2(keys: RowKeys, user_id: str, version: int, turn_tag: bytes, sealed: bytes,
            aad: bytes) -> tuple[bytes, TurnKey]:
    """A format 2 summary opened under the turn key of ``version``, and that key (with the one retry)."""
    def attempt(keyset: OwnerKeyset) -> tuple[bytes, TurnKey]:
        turn_key = keyset.turn_key(version, keys.vault_id, turn_tag)
        return turn_key.open_summary(sealed, aad), turn_key

    return keys.retrying(user_id, version, attempt)


def open_v3(keys: RowKeys, user_id: str, version: int, turn: tuple[bytes, bytes, Epoch], sealed: bytes,
            aad: bytes) -> tuple[bytes, OwnerEpochKeys]:
    """A format 3 summary of ``turn`` (owner tag, turn tag, epoch) opened under the turn and epoch key of
    ``version``, and the keys used (with the one retry). NotFound once the epoch key was destroyed."""
    owner_tag, turn_tag, epoch = turn
    epoch_key = keys.epoch_key(epoch)

    def attempt(keyset: OwnerKeyset) -> tuple[bytes, OwnerEpochKeys]:
        found = keyset.epoch_keys(version, epoch_key, keys.vault_id, owner_tag, epoch)
        return found.open_summary(turn_tag, sealed, aad), found

    return keys.retrying(user_id, version, attempt)


def open_stored_v2(keys: RowKeys, user_id: str, context: RowContext, row: SealedRow, sealed: bytes) -> bytes:
    """A stored row's format 2 summary (under its turn key), with the one retry."""
    aad = summary_aad_v2(context, row.owner_tag, row.turn_tag, row.expires_at, row.size_bytes, row.key_version)
    return open_v2(keys, user_id, row.key_version, row.turn_tag, sealed, aad)[0]
