"""Row format 3: a row's data key wrapped, and its summary sealed, under keys derived from both its owner
key version and the key of the expiry epoch its expiry falls in, so destroying that epoch key erases every copy.

* Wrapped data key: ``0x03 || E (4 bytes) || nonce (12, random) || AES-256-GCM(wrap key, DEK (32)) || tag (16)``
  = 65 bytes; aad = ``fields("scratchvault/wrap/v3", vault_id, row_id, user_id, v (8), E (8), e (8))``.
* Summary: ``0x05 || E (4 bytes) || nonce (12, random) || AES-256-GCM(summary key, record) || tag``; aad =
  ``"scratchvault/summary/v3" ||`` the clear columns of ``summary_aad_v2`` (vault_id, row_id, owner tag, turn tag,
  expiry, size, v) then E and e (8 each).
* ``PRK = keys.epochs.epoch_key.combine(owner key v, epoch key)``;
  wrap key = ``HKDF-Expand(PRK, fields("scratchvault/epoch-wrap/v1", vault_id, owner tag, v (4), E (8), e (8)), 32)``;
  summary key = ``HKDF-Expand(PRK, fields("scratchvault/epoch-summary/v1", vault_id, v (4), turn tag, E, e), 32)``.
* ``e = floor(expiry) // E`` is not stored: it comes from the expiry column, which both aads (and the metadata's)
  bind, so a row can't be moved to another epoch.

A format 1 wrapped key is 60 bytes and starts with a random nonce; ``keys/formats/dispatch.py`` tells the two apart
by length and first byte. threat_model.md, "Expiry epochs", gives the reasons.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import NoReturn, overload

from keys.crypto import kdf
from keys.crypto.aead import KEY_SIZE, NONCE_SIZE, TAG_SIZE, Aead, random_bytes
from keys.crypto.encoding import encode_fields, u32, u64
from keys.crypto.labels import EPOCH_SUMMARY, EPOCH_WRAP
from keys.crypto.labels import SUMMARY_V3 as SUMMARY_V3_LABEL
from keys.crypto.labels import WRAP_V3 as WRAP_V3_LABEL
from keys.epochs.epoch_key import EpochKey
from keys.epochs.schedule import MAX_EPOCH, Epoch, check_epoch, check_length, epoch_of
from keys.errors import IntegrityError, InvalidArgument
from keys.formats.context import RowColumns, RowContext
from keys.formats.data_key import DataKey
from keys.keyring.entries import MAX_VERSION

WRAP_V3 = 0x03
SUMMARY_V3 = 0x05
_HEAD = struct.Struct(">BI")  # format byte, epoch length
HEAD_SIZE = _HEAD.size  # format byte and E, before the nonce
WRAPPED_V3_SIZE = _HEAD.size + NONCE_SIZE + KEY_SIZE + TAG_SIZE
TURN_CIPHERS = 256  # turn summary ciphers one OwnerEpochKeys keeps (a derivation is one HMAC)
_ROW_ID_LENGTH = struct.Struct(">I").pack
_TAIL_V3 = struct.Struct(">IdIQIQIQIQ").pack


def epoch_length_of(blob: bytes, prefix: int) -> int:
    """The epoch length a format 3 wrapped key or summary names (checked by the key derivation and the aad)."""
    if len(blob) < _HEAD.size + NONCE_SIZE + TAG_SIZE or blob[0] != prefix:
        raise IntegrityError("ciphertext failed authentication")
    length: int = _HEAD.unpack_from(blob)[1]
    return length


def row_epoch(blob: bytes, prefix: int, expires_at: float) -> Epoch:
    """(E, e) of a format 3 part: E from its header, e from the row's expiry. A length or expiry no vault writes
    is tampering."""
    length = epoch_length_of(blob, prefix)
    try:
        epoch = epoch_of(expires_at, length)
    except ValueError:  # InvalidArgument: an out-of-range length or expiry in the file
        raise IntegrityError("a row names an expiry epoch no vault makes") from None
    if epoch > MAX_EPOCH:
        raise IntegrityError("a row names an expiry epoch no vault makes")
    return length, epoch


def wrap_key(prk: bytes, vault_id: bytes, owner_tag: bytes, version: int, length: int, epoch: int) -> bytes:
    """The key a row's data key is wrapped under (one HKDF-Expand block)."""
    info = encode_fields(EPOCH_WRAP, vault_id, owner_tag, _version(version), u64(check_length(length)),
                         u64(check_epoch(epoch)))
    return kdf.expand(prk, info)


def summary_key(prk: bytes, vault_id: bytes, version: int, turn_tag: bytes, length: int, epoch: int) -> bytes:
    """The key the summaries of one turn's rows expiring in this epoch are sealed under (one HKDF-Expand block)."""
    info = encode_fields(EPOCH_SUMMARY, vault_id, _version(version), turn_tag, u64(check_length(length)),
                         u64(check_epoch(epoch)))
    return kdf.expand(prk, info)


def _version(version: int) -> bytes:
    if type(version) is not int or not 1 <= version <= MAX_VERSION:
        raise InvalidArgument("a key version is out of range")
    return u32(version)


def wrap_aad_v3(ctx: RowContext, user_id: str, version: int, length: int, epoch: int) -> bytes:
    """AAD of a format 3 wrapped data key: vault, row, owner, key version and the epoch."""
    return encode_fields(WRAP_V3_LABEL, ctx.vault_id, ctx.row_id, user_id.encode(), u64(version), u64(length),
                         u64(epoch))


def summary_aad_v3(ctx: RowContext, row: RowColumns, expires_at: float, version: int, epoch: Epoch) -> bytes:
    """AAD of a format 3 summary: the clear columns, the key version and the epoch."""
    return encode_fields(SUMMARY_V3_LABEL, ctx.vault_id, ctx.row_id, row.owner_tag, row.turn_tag,
                         struct.pack(">d", expires_at), u64(row.size_bytes), u64(version), u64(epoch[0]),
                         u64(epoch[1]))


def summary_aads_v3(vault_id: bytes, owner_tag: bytes, turn_tag: bytes) -> Callable[..., bytes]:
    """``summary_aad_v3`` for the rows of one turn, as a function of (row id, expiry, size, version, E, e): a listing
    builds one per row, so the fields the turn shares are encoded once and the rest packed by one struct call (the
    same bytes: tests/vectors/row_format_v3.json pins them)."""
    head = encode_fields(SUMMARY_V3_LABEL, vault_id)
    middle = encode_fields(b"", owner_tag, turn_tag)

    def aad(row_id: bytes, expires_at: float, size_bytes: int, version: int, length: int, epoch: int) -> bytes:
        return b"".join((head, _ROW_ID_LENGTH(len(row_id)), row_id, middle,
                         _TAIL_V3(8, expires_at, 8, size_bytes, 8, version, 8, length, 8, epoch)))

    return aad


class OwnerEpochKeys:
    """The keys of one owner key version in one epoch: wraps data keys, seals and opens summaries."""

    __slots__ = ("_prk", "_turns", "_wrap", "epoch", "epoch_key", "length", "owner_tag", "vault_id", "version")

    def __init__(self, prk: bytes, epoch_key: EpochKey, vault_id: bytes, owner_tag: bytes, version: int,
                 epoch: Epoch) -> None:
        self._prk, self.epoch_key = prk, epoch_key
        self.vault_id, self.owner_tag, self.version = vault_id, owner_tag, version
        self.length, self.epoch = epoch
        self._wrap = Aead(wrap_key(prk, vault_id, owner_tag, version, *epoch))
        self._turns: dict[bytes, Aead] = {}

    def wrap(self, data_key: DataKey, aad: bytes) -> bytes:
        """``data_key`` wrapped under a fresh random nonce, headed by the format byte and E."""
        return self._wrap_with_nonce(data_key, aad, random_bytes(NONCE_SIZE))

    def _wrap_with_nonce(self, data_key: DataKey, aad: bytes, nonce: bytes) -> bytes:
        """Test seam for the frozen row-format vectors: the public path always draws ``nonce`` at random."""
        return _HEAD.pack(WRAP_V3, self.length) + nonce + self._wrap.seal(nonce, data_key._raw, aad)

    def unwrap(self, wrapped: bytes, aad: bytes) -> DataKey:
        """The data key of a format 3 wrapped key; any other key, epoch, row or byte is an IntegrityError."""
        if len(wrapped) != WRAPPED_V3_SIZE or epoch_length_of(wrapped, WRAP_V3) != self.length:
            raise IntegrityError("wrapped data key has the wrong format")
        start = _HEAD.size
        return DataKey(self._wrap.open(wrapped[start:start + NONCE_SIZE], wrapped[start + NONCE_SIZE:], aad))

    def seal_summary(self, turn_tag: bytes, plaintext: bytes, aad: bytes) -> bytes:
        """A summary record sealed under this turn's key for the epoch, with a fresh random nonce."""
        return self._seal_summary_with_nonce(turn_tag, plaintext, aad, random_bytes(NONCE_SIZE))

    def _seal_summary_with_nonce(self, turn_tag: bytes, plaintext: bytes, aad: bytes, nonce: bytes) -> bytes:
        """Test seam for the frozen row-format vectors."""
        return _HEAD.pack(SUMMARY_V3, self.length) + nonce + self._turn(turn_tag).seal(nonce, plaintext, aad)

    def open_summary(self, turn_tag: bytes, blob: bytes, aad: bytes) -> bytes:
        """Open a format 3 summary of this turn and epoch."""
        if epoch_length_of(blob, SUMMARY_V3) != self.length:
            raise IntegrityError("ciphertext failed authentication")
        start = _HEAD.size
        return self._turn(turn_tag).open(blob[start:start + NONCE_SIZE], blob[start + NONCE_SIZE:], aad)

    def turn_cipher(self, turn_tag: bytes) -> Aead:
        """The AES-GCM of this turn's summary key (a listing keeps it, and opens each row of the turn under it)."""
        return self._turn(turn_tag)

    def _turn(self, turn_tag: bytes) -> Aead:
        found = self._turns.get(turn_tag)
        if found is None:
            if len(self._turns) >= TURN_CIPHERS:
                self._turns.clear()  # bounded; a derivation is one HMAC
            found = self._turns[turn_tag] = Aead(summary_key(self._prk, self.vault_id, self.version, turn_tag,
                                                             self.length, self.epoch))
        return found

    def __repr__(self) -> str:
        return f"<OwnerEpochKeys length={self.length} epoch={self.epoch}>"

    def __reduce__(self) -> NoReturn:
        raise TypeError("key material cannot be pickled")


@overload
def seal_for_epoch(keys: OwnerEpochKeys, user_id: str, row: RowColumns, expires_at: float, data_key: DataKey,
                   summary: bytes) -> tuple[bytes, bytes]: ...


@overload
def seal_for_epoch(keys: OwnerEpochKeys, user_id: str, row: RowColumns, expires_at: float, data_key: DataKey,
                   summary: None) -> tuple[bytes, None]: ...


@overload
def seal_for_epoch(keys: OwnerEpochKeys, user_id: str, row: RowColumns, expires_at: float, data_key: DataKey,
                   summary: bytes | None) -> tuple[bytes, bytes | None]: ...


def seal_for_epoch(keys: OwnerEpochKeys, user_id: str, row: RowColumns, expires_at: float, data_key: DataKey,
                   summary: bytes | None) -> tuple[bytes, bytes | None]:
    """(wrapped data key, sealed summary or None) of ``row`` with ``expires_at``, under ``keys``' epoch."""
    if epoch_of(expires_at, keys.length) != keys.epoch:
        raise IntegrityError("a row is sealed under an epoch its expiry does not fall in")
    context = RowContext(keys.vault_id, row.row_id)
    wrapped = keys.wrap(data_key, wrap_aad_v3(context, user_id, keys.version, keys.length, keys.epoch))
    if summary is None:
        return wrapped, None
    aad = summary_aad_v3(context, row, expires_at, keys.version, (keys.length, keys.epoch))
    return wrapped, keys.seal_summary(row.turn_tag, summary, aad)
