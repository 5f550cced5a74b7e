"""Per-owner keysets: versioned AES-256 key-encryption keys, and the keys derived from them (format 1 wraps, format
2 turn summary keys, format 3 keys combined with an epoch key, the commitment the database records per version).
Their keyring entries' layout is ``keys/keyring/entries.py``.
"""

from __future__ import annotations

from typing import NoReturn

from keys.crypto import kdf
from keys.crypto.aead import KEY_SIZE, NONCE_SIZE, Aead, random_bytes
from keys.crypto.encoding import encode_fields, u32
from keys.crypto.labels import OWNER_CHECK_KEY, OWNER_KEY_CHECK
from keys.epochs.epoch_key import EpochKey
from keys.epochs.schedule import Epoch
from keys.errors import IntegrityError, KeyUnavailable
from keys.formats.data_key import DataKey
from keys.formats.v1 import WRAPPED_SIZE
from keys.formats.v2 import TurnKey, turn_summary_key
from keys.formats.v3 import OwnerEpochKeys
from keys.keyring.entries import MAX_VERSION, parse_keyset, serialize_keyset, serialize_single_key
from keys.keyring.secret import Secret

DERIVED_KEY_CACHE_SIZE = 256  # derived turn summary keys and epoch keys kept per keyset (cheap to derive again)


class OwnerKeyset:
    """An owner's key versions and which one is primary; wraps new DEKs under the primary version."""

    __slots__ = ("_ciphers", "_commitment_cache", "_epoch_keys", "_keys", "_turn_keys", "primary")

    def __init__(self, primary: int, keys: dict[int, bytes]) -> None:
        self.primary = primary
        self._keys = dict(keys)
        self._ciphers = {version: Aead(raw) for version, raw in self._keys.items()}
        self._commitment_cache: dict[tuple[int, bytes], bytes] = {}  # every put compares one; computed once
        self._turn_keys: dict[tuple[int, bytes, bytes], TurnKey] = {}
        self._epoch_keys: dict[tuple[int, bytes, bytes, Epoch], OwnerEpochKeys] = {}

    @classmethod
    def generate(cls, version: int = 1) -> OwnerKeyset:
        """A new keyset with a single random version."""
        return cls(version, {version: random_bytes(KEY_SIZE)})

    @classmethod
    def joined(cls, parts: list[OwnerKeyset]) -> OwnerKeyset | None:
        """One keyset of the versions of ``parts`` (each read from its own entry), the highest one primary."""
        keys = {version: raw for part in parts for version, raw in part._keys.items()}
        return cls(max(keys), keys) if keys else None

    @property
    def versions(self) -> tuple[int, ...]:
        """The key versions this keyset holds."""
        return tuple(sorted(self._keys))

    def with_new_version(self, version: int) -> OwnerKeyset:
        """A copy with one more random version, made primary (rotation); ``version`` was reserved for it."""
        if version > MAX_VERSION or version <= max(self._keys):
            raise KeyUnavailable("this owner's keyset has run out of key versions")
        return OwnerKeyset(version, {**self._keys, version: random_bytes(KEY_SIZE)})

    def single(self, version: int) -> OwnerKeyset | None:
        """The keyset of just ``version``, if this one holds it."""
        raw = self._keys.get(version)
        return None if raw is None else OwnerKeyset(version, {version: raw})

    def entry(self, version: int) -> Secret:
        """The keyring entry of one version (one key, as the index key's entry)."""
        return serialize_single_key(self._keys[version])

    def wrap(self, data_key: DataKey, aad: bytes) -> bytes:
        """Wrap ``data_key`` under the primary version with a random nonce: nonce || ct || tag."""
        return self._wrap_with_nonce(data_key, aad, random_bytes(NONCE_SIZE))

    def _wrap_with_nonce(self, data_key: DataKey, aad: bytes, nonce: bytes) -> bytes:
        """Test seam for the frozen row-format vectors: the public path always draws ``nonce`` at random."""
        return nonce + self._ciphers[self.primary].seal(nonce, data_key._raw, aad)

    def unwrap(self, version: int, wrapped: bytes, aad: bytes) -> DataKey:
        """Unwrap a DEK stored under ``version``; a wrong owner, row, version or byte is an IntegrityError."""
        cipher = self._ciphers.get(version)
        if cipher is None:
            raise IntegrityError("row refers to a key version this owner's keyset does not hold")
        if len(wrapped) != WRAPPED_SIZE:
            raise IntegrityError("wrapped data key has the wrong length")
        return DataKey(cipher.open(wrapped[:NONCE_SIZE], wrapped[NONCE_SIZE:], aad))

    def turn_key(self, version: int, vault_id: bytes, turn_tag: bytes) -> TurnKey:
        """The summary key of one turn under ``version`` (derived, see keys/formats/v2.py); a version this keyset
        does not hold is an IntegrityError, like a wrapped key that names one."""
        key = (version, vault_id, turn_tag)
        found = self._turn_keys.get(key)
        if found is None:
            raw = self._keys.get(version)
            if raw is None:
                raise IntegrityError("row refers to a key version this owner's keyset does not hold")
            found = turn_summary_key(raw, vault_id, version, turn_tag)
            if len(self._turn_keys) >= DERIVED_KEY_CACHE_SIZE:
                self._turn_keys.clear()  # bounded; a derivation is one HMAC
            self._turn_keys[key] = found
        return found

    def epoch_keys(self, version: int, epoch_key: EpochKey, vault_id: bytes, owner_tag: bytes,
                   epoch: Epoch) -> OwnerEpochKeys:
        """The format 3 keys of ``version`` in an epoch (``keys/formats/v3.py``), kept while the same epoch key
        object is handed in (a put derives them once per epoch, not once per row)."""
        slot = (version, vault_id, owner_tag, epoch)
        found = self._epoch_keys.get(slot)
        if found is None or found.epoch_key is not epoch_key:
            raw = self._keys.get(version)
            if raw is None:
                raise IntegrityError("row refers to a key version this owner's keyset does not hold")
            found = OwnerEpochKeys(epoch_key.combined_with(raw), epoch_key, vault_id, owner_tag, version, epoch)
            if len(self._epoch_keys) >= DERIVED_KEY_CACHE_SIZE:
                self._epoch_keys.clear()
            self._epoch_keys[slot] = found
        return found

    def commitment(self, version: int, vault_id: bytes) -> bytes:
        """A commitment to one key version, stored in the database to detect a keyring that swapped keys.
        It is an HMAC under a key derived from the version's key (HKDF-Expand, one block), so no value keyed
        by the wrapping key itself is stored (threat_model.md, "Key hierarchy", names the key's two uses)."""
        value = self._commitment_cache.get((version, vault_id))
        if value is None:
            commitment_key = kdf.expand(self._keys[version], OWNER_CHECK_KEY)
            value = kdf.mac(commitment_key, encode_fields(OWNER_KEY_CHECK, vault_id, u32(version)))
            self._commitment_cache[(version, vault_id)] = value
        return value

    def serialize(self) -> Secret:
        """The keyring entry of the whole keyset (the layout of files made before schema 4)."""
        return serialize_keyset(self.primary, self._keys)

    @classmethod
    def parse(cls, entry: Secret) -> OwnerKeyset:
        """The keyset a keyring entry holds; anything unexpected is KeyUnavailable with the remedy."""
        primary, keys = parse_keyset(entry)
        return cls(primary, keys)

    def __repr__(self) -> str:
        return f"<OwnerKeyset primary={self.primary} versions={list(self.versions)}>"

    def __reduce__(self) -> NoReturn:
        raise TypeError("key material cannot be pickled")
