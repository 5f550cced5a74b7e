"""Expiry epochs: time cut into epochs of ``length`` seconds, one random key per epoch, destroyed once the
epoch has ended, and the keys a row's data key and summary will be sealed under, derived from both its owner key
version and the key of the epoch its expiry falls in (threat_model.md, "Expiry epochs").

* epoch of an expiry ``t``: ``e = floor(t / E)``; it ends at ``(e + 1) * E``; its key is destroyed after
  ``(e + 1) * E + skew``.
* combined key: ``PRK = HKDF-Extract(salt = "scratchvault/epoch-combiner/v1", IKM = owner key v || epoch key)``
  (both 32 bytes; the concatenation combiner of hybrid key exchange: PRK is pseudorandom if either key is).
* wrap key: ``HKDF-Expand(PRK, fields("scratchvault/epoch-wrap/v1", vault_id, owner tag, v, E, e), 32)``.
* summary key: ``HKDF-Expand(PRK, fields("scratchvault/epoch-summary/v1", vault_id, v, turn tag, E, e), 32)``.
* commitment to an epoch key: ``HMAC(HKDF-Expand(epoch key, "scratchvault/epoch-check-key/v1", 32),
  fields("scratchvault/epoch-key-check/v1", vault_id, E, e))``.

``fields`` is ``keys.envelope.encode_fields`` (4-byte length prefixes); v is 4 bytes, E and e 8 bytes, big-endian.
Pure functions: the keys and their derivation; keys/epochrow.py seals rows under them.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import struct
from typing import NoReturn

from keys.aead import KEY_SIZE, random_bytes
from keys.envelope import encode_fields
from keys.errors import IntegrityError, InvalidArgument
from keys.keyset import MAX_VERSION, serialize_single_key
from keys.secret import Secret

DEFAULT_EPOCH_SECONDS = 3600  # bench/epoch_keyring.py and threat_model.md, "Expiry epochs", say why
MIN_EPOCH_SECONDS = 60
MAX_EPOCH_SECONDS = 86400
DEFAULT_SKEW_SECONDS = 300
MAX_SKEW_SECONDS = 3600
COMBINER_SALT = b"scratchvault/epoch-combiner/v1"
WRAP_LABEL = b"scratchvault/epoch-wrap/v1"
SUMMARY_LABEL = b"scratchvault/epoch-summary/v1"
CHECK_KEY_INFO = b"scratchvault/epoch-check-key/v1"
CHECK_LABEL = b"scratchvault/epoch-key-check/v1"
_MAX_EPOCH = 2**63 - 1
_U32, _U64 = struct.Struct(">I").pack, struct.Struct(">Q").pack


def check_length(length: object) -> int:
    """An epoch length in whole seconds within the bounds, else InvalidArgument."""
    if type(length) is not int or not MIN_EPOCH_SECONDS <= length <= MAX_EPOCH_SECONDS:
        raise InvalidArgument(f"epoch_seconds must be a whole number of seconds from {MIN_EPOCH_SECONDS} to "
                              f"{MAX_EPOCH_SECONDS}")
    return length


def check_skew(skew: object) -> int:
    """A clock-skew allowance in whole seconds within the bounds, else InvalidArgument."""
    if type(skew) is not int or not 0 <= skew <= MAX_SKEW_SECONDS:
        raise InvalidArgument(f"epoch_skew_seconds must be a whole number of seconds from 0 to {MAX_SKEW_SECONDS}")
    return skew


def epoch_of(expires_at: float, length: int) -> int:
    """The epoch an expiry falls in, ``floor(expires_at / length)``, computed exactly on integers
    (``floor(floor(t) / E) == floor(t / E)`` for a whole E)."""
    if not math.isfinite(expires_at) or expires_at < 0:
        raise InvalidArgument("an expiry must be a finite, non-negative time")
    return math.floor(expires_at) // check_length(length)


def epoch_end(epoch: int, length: int) -> int:
    """When the epoch ends: the first second no expiry in it reaches."""
    return (epoch + 1) * check_length(length)


def destroy_after(epoch: int, length: int, skew: int) -> int:
    """When the epoch's key may be destroyed: its end plus the skew allowance between hosts' clocks."""
    return epoch_end(epoch, length) + check_skew(skew)


def epoch_name(length: int, epoch: int, attempt: int) -> str:
    """The keyring user name of one attempt at an epoch's key: ``<E>.<e>.<attempt>`` (a write given up and landing
    late can only bring back its own attempt, never overwrite the key recorded for the epoch)."""
    return f"{check_length(length)}.{_epoch(epoch)}.{attempt}"


def combine(owner_key: bytes, epoch_key: bytes) -> bytes:
    """HKDF-Extract over both keys: the PRK every epoch-bound key of this owner key version and epoch comes from."""
    if len(owner_key) != KEY_SIZE or len(epoch_key) != KEY_SIZE:
        raise IntegrityError("a key has the wrong length")
    return hmac.new(COMBINER_SALT, owner_key + epoch_key, hashlib.sha256).digest()


def wrap_key(prk: bytes, vault_id: bytes, owner_tag: bytes, version: int, length: int, epoch: int) -> bytes:
    """The key a row's data key is wrapped under (one HKDF-Expand block)."""
    info = encode_fields(WRAP_LABEL, vault_id, owner_tag, _version(version), _U64(check_length(length)),
                         _U64(_epoch(epoch)))
    return _expand(prk, info)


def summary_key(prk: bytes, vault_id: bytes, version: int, turn_tag: bytes, length: int, epoch: int) -> bytes:
    """The key the summaries of one turn's rows expiring in this epoch are sealed under (one HKDF-Expand block)."""
    info = encode_fields(SUMMARY_LABEL, vault_id, _version(version), turn_tag, _U64(check_length(length)),
                         _U64(_epoch(epoch)))
    return _expand(prk, info)


def _expand(prk: bytes, info: bytes) -> bytes:
    """HKDF-Expand (RFC 5869) of 32 bytes: one block, ``HMAC(PRK, info || 0x01)``."""
    return hmac.new(prk, info + b"\x01", hashlib.sha256).digest()


def _version(version: int) -> bytes:
    if type(version) is not int or not 1 <= version <= MAX_VERSION:
        raise InvalidArgument("a key version is out of range")
    return _U32(version)


def _epoch(epoch: int) -> int:
    if type(epoch) is not int or not 0 <= epoch <= _MAX_EPOCH:
        raise InvalidArgument("an epoch number is out of range")
    return epoch


class EpochKey:
    """One epoch's random key: 256 bits, shared by every owner of the vault; never shown or pickled."""

    __slots__ = ("_checks", "_raw")

    def __init__(self, raw: bytes) -> None:
        if len(raw) != KEY_SIZE:
            raise IntegrityError("an epoch key has the wrong length")
        self._raw = raw
        self._checks: dict[tuple[bytes, int, int], bytes] = {}  # every put compares one: computed once

    @classmethod
    def generate(cls) -> EpochKey:
        """A fresh random epoch key."""
        return cls(random_bytes(KEY_SIZE))

    def entry(self) -> Secret:
        """The keyring entry (``scratchvault-key/1``, as the index key and owner key versions)."""
        return serialize_single_key(self._raw)

    def commitment(self, vault_id: bytes, length: int, epoch: int) -> bytes:
        """What the database records for this key: an HMAC under a key expanded from it, naming the vault and the
        epoch, so a keyring that hands back another key (or this key under another epoch) is caught."""
        found = self._checks.get((vault_id, length, epoch))
        if found is None:
            check_key = _expand(self._raw, CHECK_KEY_INFO)
            message = encode_fields(CHECK_LABEL, vault_id, _U64(check_length(length)), _U64(_epoch(epoch)))
            found = self._checks[(vault_id, length, epoch)] = hmac.new(check_key, message, hashlib.sha256).digest()
        return found

    def combined_with(self, owner_key: bytes) -> bytes:
        """The PRK of ``combine(owner_key, this key)`` (for keys/ only: the row recipe of step 2)."""
        return combine(owner_key, self._raw)

    def __repr__(self) -> str:
        return "<EpochKey>"

    def __reduce__(self) -> NoReturn:
        raise TypeError("key material cannot be pickled")
