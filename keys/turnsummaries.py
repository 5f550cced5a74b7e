"""Opening summaries without a row's data key: a listing opens one turn's summaries under keys derived once per
key version (format 2) or per key version and epoch (format 3), never unwrapping a key per row. A summary of
format 1 (under the DEK) still needs its row's data key. Layout: keys/epochrow.py and keys/turnkey.py."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TYPE_CHECKING

from keys.aead import NONCE_SIZE, TAG_SIZE, Aead
from keys.envelope import SUMMARY_V2, RowContext, summary_aad, summary_aad_v2, summary_aads_v2
from keys.epochrow import HEAD_SIZE, SUMMARY_V3, EpochBound, row_epoch, summary_aads_v3
from keys.epochs import MAX_EPOCH_SECONDS, MIN_EPOCH_SECONDS, EpochKey
from keys.errors import IntegrityError, NotFound
from keys.keyset import OwnerKeyset
from keys.turnkey import TurnKey

_LENGTH_OF = struct.Struct(">I").unpack_from  # E, after the format byte
_NONCE, _SEALED = HEAD_SIZE, HEAD_SIZE + NONCE_SIZE
_SMALLEST = _SEALED + TAG_SIZE
_LAST_EXPIRY = 2.0**53  # below it an expiry is a whole-second-exact double and its epoch within range

if TYPE_CHECKING:
    from keys.rowseal import RowRecipe, SealedRow


class TurnSummaries:
    """Opens the summaries of one owner's turn: format 3 and 2 under derived keys, format 1 under the DEK."""

    __slots__ = ("_aad_of", "_aad_v3", "_ciphers", "_owner_tag", "_recipe", "_turn_keys", "_turn_tag", "_user_id")

    def __init__(self, recipe: RowRecipe, user_id: str, owner_tag: bytes, turn_tag: bytes) -> None:
        self._recipe, self._user_id, self._owner_tag, self._turn_tag = recipe, user_id, owner_tag, turn_tag
        self._aad_of = summary_aads_v2(recipe.vault_id, owner_tag, turn_tag)
        self._aad_v3 = summary_aads_v3(recipe.vault_id, owner_tag, turn_tag)
        self._turn_keys: dict[int, TurnKey] = {}
        self._ciphers: dict[tuple[int, int, int], Aead] = {}  # the turn's summary cipher per (version, E, e)

    def open(self, row_id: bytes, version: int, expires_at: float, size_bytes: int, sealed: bytes,
             wrapped_key: Callable[[int], bytes], seq: int) -> tuple[bytes, bool] | None:
        """A listed row's summary record and whether it is of format 1, or None when the row's epoch key was
        destroyed (the row is gone, as an expired one); ``wrapped_key(seq)`` fetches the row's wrapped data key,
        needed only for format 1. (No closure in here: a listing calls it once per row.)"""
        try:
            if sealed[0] == SUMMARY_V3:
                return self._open_v3(row_id, version, expires_at, size_bytes, sealed), False
            if sealed[0] != SUMMARY_V2:
                return self._open_v1(row_id, version, expires_at, size_bytes, sealed, wrapped_key(seq)), True
        except NotFound:
            return None
        aad = self._aad_of(row_id, expires_at, size_bytes, version)
        cached = self._turn_keys.get(version)
        if cached is not None:
            try:
                return cached.open_summary(sealed, aad), False
            except IntegrityError:
                pass  # opened again below, with a reloaded keyset if this one was stale
        plain, self._turn_keys[version] = self._recipe.retrying(self._user_id, version, _open_v2,
                                                                self._recipe.vault_id, self._turn_tag, sealed, aad)
        return plain, False

    def _open_v3(self, row_id: bytes, version: int, expires_at: float, size_bytes: int, sealed: bytes) -> bytes:
        """Open under the turn's key for the version and epoch, kept for the listing; retried once with a reloaded
        keyset (a stale cached one) before it counts as tampering. A row of an epoch the listing met already costs
        one header read, one aad and one open (a listing opens thousands)."""
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
        plain, bound = self._recipe.retrying(
            self._user_id, version, open_summary_v3, self._recipe.vault_id, self._recipe.epoch_key(epoch),
            self._owner_tag, self._turn_tag, epoch, sealed, aad)
        self._ciphers[(version, *epoch)] = bound.turn_cipher(self._turn_tag)
        return plain

    def _open_v1(self, row_id: bytes, version: int, expires_at: float, size_bytes: int, sealed: bytes,
                 wrapped: bytes) -> bytes:
        """Open a format 1 summary under the row's DEK (unwrapped, under its epoch if it has one)."""
        data_key = self._recipe.data_key(self._user_id, row_id, self._owner_tag, version, expires_at, wrapped)
        return data_key.open_summary(sealed, summary_aad(
            RowContext(self._recipe.vault_id, row_id), self._owner_tag, self._turn_tag, expires_at, size_bytes))


def _open_v2(keyset: OwnerKeyset, version: int, vault_id: bytes, turn_tag: bytes, sealed: bytes,
             aad: bytes) -> tuple[bytes, TurnKey]:
    """A format 2 summary opened under the turn key ``keyset`` derives, and that key."""
    turn_key = keyset.turn_key(version, vault_id, turn_tag)
    return turn_key.open_summary(sealed, aad), turn_key


def open_summary_v2(recipe: RowRecipe, user_id: str, context: RowContext, row: SealedRow, sealed: bytes) -> bytes:
    """A stored row's format 2 summary (under its turn key), with the one retry."""
    aad = summary_aad_v2(context, row.owner_tag, row.turn_tag, row.expires_at, row.size_bytes, row.key_version)
    return recipe.retrying(user_id, row.key_version, _open_v2, context.vault_id, row.turn_tag, sealed, aad)[0]


def open_summary_v3(keyset: OwnerKeyset, version: int, vault_id: bytes, epoch_key: EpochKey, owner_tag: bytes,
                    turn_tag: bytes, epoch: tuple[int, int], sealed: bytes, aad: bytes) -> tuple[bytes, EpochBound]:
    """A format 3 summary opened under the turn and epoch key ``keyset`` derives, and the keys used."""
    bound = keyset.epoch_bound(version, epoch_key, vault_id, owner_tag, *epoch)
    return bound.open_summary(turn_tag, sealed, aad), bound
