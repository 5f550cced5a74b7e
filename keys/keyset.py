"""Per-owner keysets: versioned AES-256 key-encryption keys, their keyring serialisation, wrap and unwrap.

Serialised form (the keyring entry's password), strictly parsed::

    {"format": "scratchvault-keyset/1", "primary": 1, "keys": {"1": "<base64 of 32 bytes>"}}
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from typing import TYPE_CHECKING, NoReturn

from keys.aead import KEY_SIZE, NONCE_SIZE, TAG_SIZE, Aead, random_bytes
from keys.datakey import DataKey
from keys.envelope import encode_fields
from keys.errors import IntegrityError, KeyUnavailable
from keys.secret import Secret
from keys.turnkey import TurnKey, derive

if TYPE_CHECKING:  # keys/epochs.py imports this module
    from keys.epochrow import EpochBound
    from keys.epochs import EpochKey

KEYSET_FORMAT = "scratchvault-keyset/1"
WRAPPED_SIZE = NONCE_SIZE + KEY_SIZE + TAG_SIZE
MAX_VERSION = 2**31 - 1  # a version is 4 bytes in key derivations and commitments
TURN_KEY_CACHE_SIZE = 256  # derived turn summary keys kept per keyset (cheap to derive again)
MAX_ENTRY_CHARS = 1 << 20  # far above any real keyset; bounds what a lying keyring can make us parse
MALFORMED = (
    "the keyring entry for this owner's keys is malformed (not a scratchvault keyset); "
    "restore it from the keyring backup"
)


class OwnerKeyset:
    """An owner's key versions and which one is primary; wraps new DEKs under the primary version."""

    __slots__ = ("_bound", "_ciphers", "_commitment_cache", "_keys", "_turn_keys", "primary")

    def __init__(self, primary: int, keys: dict[int, bytes]) -> None:
        self.primary = primary
        self._keys = dict(keys)
        self._ciphers = {version: Aead(raw) for version, raw in self._keys.items()}
        self._commitment_cache: dict[tuple[int, bytes], bytes] = {}  # every put compares one; computed once
        self._turn_keys: dict[tuple[int, bytes, bytes], TurnKey] = {}
        self._bound: dict[tuple[int, bytes, bytes, int, int], EpochBound] = {}

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

    def without_versions(self, versions: set[int]) -> OwnerKeyset:
        """A copy without ``versions`` (retirement); the primary version is never removed."""
        kept = {v: k for v, k in self._keys.items() if v not in versions or v == self.primary}
        return OwnerKeyset(self.primary, kept)

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
        """The summary key of one turn under ``version`` (derived, see keys/turnkey.py); a version this keyset
        does not hold is an IntegrityError, like a wrapped key that names one."""
        key = (version, vault_id, turn_tag)
        found = self._turn_keys.get(key)
        if found is None:
            raw = self._keys.get(version)
            if raw is None:
                raise IntegrityError("row refers to a key version this owner's keyset does not hold")
            found = derive(raw, vault_id, version, turn_tag)
            if len(self._turn_keys) >= TURN_KEY_CACHE_SIZE:
                self._turn_keys.clear()  # bounded; a derivation is one HMAC
            self._turn_keys[key] = found
        return found

    def epoch_bound(self, version: int, epoch_key: EpochKey, vault_id: bytes, owner_tag: bytes, length: int,
                    epoch: int) -> EpochBound:
        """The wrap and summary keys of ``version`` combined with an epoch's key (keys/epochrow.py), kept while the
        same epoch key object is handed in (a put derives them once per epoch, not once per row)."""
        slot = (version, vault_id, owner_tag, length, epoch)
        found = self._bound.get(slot)
        if found is None or found.epoch_key is not epoch_key:
            from keys.epochrow import EpochBound  # here: keys/epochs.py imports this module

            raw = self._keys.get(version)
            if raw is None:
                raise IntegrityError("row refers to a key version this owner's keyset does not hold")
            found = EpochBound(epoch_key.combined_with(raw), epoch_key, vault_id, owner_tag, version, length, epoch)
            if len(self._bound) >= TURN_KEY_CACHE_SIZE:
                self._bound.clear()
            self._bound[slot] = found
        return found

    def commitment(self, version: int, vault_id: bytes) -> bytes:
        """A commitment to one key version, stored in the database to detect a keyring that swapped keys.
        It is an HMAC under a key derived from the version's key (HKDF-Expand, one block), so no value keyed
        by the wrapping key itself is stored (threat_model.md, "Key hierarchy", names the key's two uses)."""
        value = self._commitment_cache.get((version, vault_id))
        if value is None:
            label = b"scratchvault/key-check-key/v1\x01"  # part of the stored commitments: never renamed
            commitment_key = hmac.new(self._keys[version], label, hashlib.sha256).digest()
            message = encode_fields(b"scratchvault/key-check/v1", vault_id, version.to_bytes(4, "big"))
            value = hmac.new(commitment_key, message, hashlib.sha256).digest()
            self._commitment_cache[(version, vault_id)] = value
        return value

    def serialize(self) -> Secret:
        """The keyring entry (JSON, keys in base64)."""
        keys = {str(version): base64.b64encode(raw).decode() for version, raw in sorted(self._keys.items())}
        return Secret(json.dumps({"format": KEYSET_FORMAT, "primary": self.primary, "keys": keys}))

    @classmethod
    def parse(cls, entry: Secret) -> OwnerKeyset:
        """Parse a keyring entry strictly; anything unexpected is KeyUnavailable with the remedy. Raised here,
        where no local holds the entry's text or a key: the parse itself answers None instead of raising."""
        keyset = _keyset_of(entry.reveal())
        if keyset is None:
            raise KeyUnavailable(MALFORMED)
        return keyset

    def __repr__(self) -> str:
        return f"<OwnerKeyset primary={self.primary} versions={list(self.versions)}>"

    def __reduce__(self) -> NoReturn:
        raise TypeError("key material cannot be pickled")


def _load_entry(text: object, members: set[str]) -> dict[str, object] | None:
    """A JSON object with exactly ``members`` (no duplicates, no extras), or None; bounded in size."""
    if not isinstance(text, str) or len(text) > MAX_ENTRY_CHARS:
        return None
    try:
        document = json.loads(text, object_pairs_hook=_no_duplicates)
    except (ValueError, RecursionError):
        return None
    return document if isinstance(document, dict) and set(document) == members else None


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
    document = dict(pairs)
    if len(document) != len(pairs):
        raise ValueError("duplicate member")
    return document


def _keyset_of(text: str) -> OwnerKeyset | None:
    """The keyset an entry's text holds, or None if it is not exactly what ``serialize`` writes."""
    document = _load_entry(text, {"format", "primary", "keys"})
    if document is None or document["format"] != KEYSET_FORMAT:
        return None
    primary, entries = document["primary"], document["keys"]
    if not isinstance(entries, dict) or not entries:
        return None
    keys = {}
    for text_version, text_key in entries.items():
        version, raw = _parse_version(text_version), _parse_key(text_key)
        if version is None or raw is None:
            return None
        keys[version] = raw
    if type(primary) is not int or primary not in keys:
        return None
    return OwnerKeyset(primary, keys)


def _parse_version(text: object) -> int | None:
    """A canonical decimal version: "1", never "01", "+1", non-ASCII digits or 5,000 digits (else None)."""
    if not isinstance(text, str) or not 1 <= len(text) <= 10 or not (text.isascii() and text.isdigit()):
        return None
    version = int(text)
    return version if str(version) == text and 1 <= version <= MAX_VERSION else None


def _parse_key(text: object) -> bytes | None:
    """32 key bytes from strict Base64, else None."""
    try:
        raw = base64.b64decode(text, validate=True) if isinstance(text, str) else b""
    except (binascii.Error, ValueError):
        return None
    return raw if len(raw) == KEY_SIZE else None


def parse_single_key(entry: Secret, what: str) -> bytes:
    """Parse a keyring entry holding one base64 key (the index key); raised here with no key in a local."""
    document = _load_entry(entry.reveal(), {"format", "key"})
    raw = _parse_key(document["key"]) if document is not None and document["format"] == "scratchvault-key/1" else None
    del document
    if raw is None:
        raise KeyUnavailable(f"the keyring entry for the {what} is malformed; restore it from the keyring backup")
    return raw


def serialize_single_key(raw: bytes) -> Secret:
    """Keyring entry of a single key."""
    return Secret(json.dumps({"format": "scratchvault-key/1", "key": base64.b64encode(raw).decode()}))
