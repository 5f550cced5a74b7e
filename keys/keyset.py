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

from keys.aead import KEY_SIZE, NONCE_SIZE, TAG_SIZE, Aead, random_bytes
from keys.datakey import DataKey
from keys.envelope import encode_fields
from keys.errors import IntegrityError, KeyUnavailable

KEYSET_FORMAT = "scratchvault-keyset/1"
WRAPPED_SIZE = NONCE_SIZE + KEY_SIZE + TAG_SIZE
MAX_VERSION = 2**31 - 1
MAX_ENTRY_CHARS = 1 << 20  # far above any real keyset; bounds what a lying keyring can make us parse
MALFORMED = (
    "the keyring entry for this owner's keys is malformed (not a scratchvault keyset); "
    "restore it from the keyring backup"
)


class OwnerKeyset:
    """An owner's key versions and which one is primary; wraps new DEKs under the primary version."""

    __slots__ = ("_ciphers", "_keys", "primary")

    def __init__(self, primary: int, keys: dict[int, bytes]) -> None:
        self.primary = primary
        self._keys = dict(keys)
        self._ciphers = {version: Aead(raw) for version, raw in self._keys.items()}

    @classmethod
    def generate(cls) -> OwnerKeyset:
        """A new keyset with a single random version 1."""
        return cls(1, {1: random_bytes(KEY_SIZE)})

    @property
    def versions(self) -> tuple[int, ...]:
        """The key versions this keyset holds."""
        return tuple(sorted(self._keys))

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

    def check_value(self, version: int, vault_id: bytes) -> bytes:
        """A commitment to one key version, stored in the database to detect a keyring that swapped keys."""
        message = encode_fields(b"scratchvault/key-check/v1", vault_id, version.to_bytes(4, "big"))
        return hmac.new(self._keys[version], message, hashlib.sha256).digest()

    def serialize(self) -> str:
        """The keyring representation (JSON, keys in base64)."""
        keys = {str(v): base64.b64encode(k).decode() for v, k in sorted(self._keys.items())}
        return json.dumps({"format": KEYSET_FORMAT, "primary": self.primary, "keys": keys})

    @classmethod
    def parse(cls, text: object) -> OwnerKeyset:
        """Parse a keyring entry strictly; anything unexpected is KeyUnavailable with the remedy."""
        try:
            document = json.loads(text) if isinstance(text, str) and len(text) <= MAX_ENTRY_CHARS else None
        except (ValueError, RecursionError):
            document = None
        if not isinstance(document, dict) or document.get("format") != KEYSET_FORMAT:
            raise KeyUnavailable(MALFORMED)
        primary, entries = document.get("primary"), document.get("keys")
        if not isinstance(entries, dict) or not entries:
            raise KeyUnavailable(MALFORMED)
        keys = {_parse_version(v): _parse_key(k) for v, k in entries.items()}
        if type(primary) is not int or primary not in keys:
            raise KeyUnavailable(MALFORMED)
        return cls(primary, keys)

    def __repr__(self) -> str:
        return f"<OwnerKeyset primary={self.primary} versions={list(self.versions)}>"

    def __reduce__(self) -> object:
        raise TypeError("key material cannot be pickled")


def _parse_version(text: object) -> int:
    if not isinstance(text, str) or not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= MAX_VERSION:
        raise KeyUnavailable(MALFORMED)
    return int(text)


def _parse_key(text: object) -> bytes:
    try:
        raw = base64.b64decode(text, validate=True) if isinstance(text, str) else b""
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != KEY_SIZE:
        raise KeyUnavailable(MALFORMED)
    return raw


def parse_single_key(text: object, what: str) -> bytes:
    """Parse a keyring entry holding one base64 key (the index key)."""
    try:
        document = json.loads(text) if isinstance(text, str) and len(text) <= MAX_ENTRY_CHARS else None
    except (ValueError, RecursionError):
        document = None
    if not isinstance(document, dict) or document.get("format") != "scratchvault-key/1":
        raise KeyUnavailable(f"the keyring entry for the {what} is malformed; restore it from the keyring backup")
    try:
        return _parse_key(document.get("key"))
    except KeyUnavailable:
        raise KeyUnavailable(
            f"the keyring entry for the {what} is malformed; restore it from the keyring backup"
        ) from None


def serialize_single_key(raw: bytes) -> str:
    """Keyring representation of a single key."""
    return json.dumps({"format": "scratchvault-key/1", "key": base64.b64encode(raw).decode()})
