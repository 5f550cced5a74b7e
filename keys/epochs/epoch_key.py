"""One expiry epoch's key: 256 random bits shared by every owner of the vault, its keyring entry and entry name, its
commitment, and the PRK it makes with an owner key version (threat_model.md, "Expiry epochs").

* combined key: ``PRK = HKDF-Extract(salt = "scratchvault/epoch-combiner/v1", IKM = owner key v || epoch key)``
  (both 32 bytes; the concatenation combiner of hybrid key exchange: PRK is pseudorandom if either key is). The
  wrap and summary keys of format 3 are expanded from it (``keys/formats/v3.py``).
* commitment to an epoch key: ``HMAC(HKDF-Expand(epoch key, "scratchvault/epoch-check-key/v1", 32),
  fields("scratchvault/epoch-key-check/v1", vault_id, E (8), e (8)))``.
"""

from __future__ import annotations

from typing import NoReturn

from keys.crypto import kdf
from keys.crypto.aead import KEY_SIZE, random_bytes
from keys.crypto.encoding import encode_fields, u64
from keys.crypto.labels import EPOCH_CHECK_KEY, EPOCH_COMBINER, EPOCH_KEY_CHECK
from keys.epochs.schedule import check_epoch, check_length
from keys.errors import IntegrityError
from keys.keyring.entries import serialize_single_key
from keys.keyring.secret import Secret


def epoch_name(length: int, epoch: int, attempt: int) -> str:
    """The keyring user name of one attempt at an epoch's key: ``<E>.<e>.<attempt>`` (a write given up and landing
    late can only bring back its own attempt, never overwrite the key recorded for the epoch)."""
    return f"{check_length(length)}.{check_epoch(epoch)}.{attempt}"


def combine(owner_key: bytes, epoch_key: bytes) -> bytes:
    """HKDF-Extract over both keys: the PRK every epoch-bound key of this owner key version and epoch comes from."""
    if len(owner_key) != KEY_SIZE or len(epoch_key) != KEY_SIZE:
        raise IntegrityError("a key has the wrong length")
    return kdf.extract(EPOCH_COMBINER, owner_key + epoch_key)


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
            check_key = kdf.expand(self._raw, EPOCH_CHECK_KEY)
            message = encode_fields(EPOCH_KEY_CHECK, vault_id, u64(check_length(length)), u64(check_epoch(epoch)))
            found = self._checks[(vault_id, length, epoch)] = kdf.mac(check_key, message)
        return found

    def combined_with(self, owner_key: bytes) -> bytes:
        """The PRK of ``combine(owner_key, this key)``, which the format 3 keys of one owner version expand."""
        return combine(owner_key, self._raw)

    def __repr__(self) -> str:
        return "<EpochKey>"

    def __reduce__(self) -> NoReturn:
        raise TypeError("key material cannot be pickled")
