"""The layout of a keyring entry's password, strictly parsed, for every key scratchvault keeps in the keyring.

* One key (the index key, an owner key version, an epoch key): ``{"format": "scratchvault-key/1", "key":
  "<base64 of 32 bytes>"}``.
* An owner keyset, the layout of files made before schema 4 (read, never written by a vault):
  ``{"format": "scratchvault-keyset/1", "primary": 1, "keys": {"1": "<base64 of 32 bytes>"}}``.

A parse is exact: one JSON object with exactly these members, no duplicate, canonical decimal versions, strict
Base64 of exactly 32 bytes, bounded in size. Anything else is KeyUnavailable with the remedy, raised where no local
holds the entry's text or a key.
"""

from __future__ import annotations

import base64
import binascii
import json

from keys.crypto.aead import KEY_SIZE
from keys.errors import KeyUnavailable
from keys.keyring.secret import Secret

KEYSET_FORMAT = "scratchvault-keyset/1"
KEY_FORMAT = "scratchvault-key/1"
MAX_VERSION = 2**31 - 1  # a version is 4 bytes in key derivations and commitments
MAX_ENTRY_CHARS = 1 << 20  # far above any real entry; bounds what a lying keyring can make us parse
MALFORMED = (
    "the keyring entry for this owner's keys is malformed (not a scratchvault keyset); "
    "restore it from the keyring backup"
)


def serialize_single_key(raw: bytes) -> Secret:
    """Keyring entry of a single key."""
    return Secret(json.dumps({"format": KEY_FORMAT, "key": base64.b64encode(raw).decode()}))


def parse_single_key(entry: Secret, what: str) -> bytes:
    """Parse a keyring entry holding one base64 key; raised here with no key in a local."""
    document = _load_entry(entry.reveal(), {"format", "key"})
    raw = _parse_key(document["key"]) if document is not None and document["format"] == KEY_FORMAT else None
    del document
    if raw is None:
        raise KeyUnavailable(f"the keyring entry for the {what} is malformed; restore it from the keyring backup")
    return raw


def serialize_keyset(primary: int, keys: dict[int, bytes]) -> Secret:
    """Keyring entry of a keyset (JSON, keys in base64)."""
    encoded = {str(version): base64.b64encode(raw).decode() for version, raw in sorted(keys.items())}
    return Secret(json.dumps({"format": KEYSET_FORMAT, "primary": primary, "keys": encoded}))


def parse_keyset(entry: Secret) -> tuple[int, dict[int, bytes]]:
    """(primary version, key by version) of a keyset entry; anything unexpected is KeyUnavailable (MALFORMED)."""
    parsed = _keyset_of(entry.reveal())
    if parsed is None:
        raise KeyUnavailable(MALFORMED)
    return parsed


def _keyset_of(text: str) -> tuple[int, dict[int, bytes]] | None:
    """The keyset an entry's text holds, or None if it is not exactly what ``serialize_keyset`` writes."""
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
    return primary, keys


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
