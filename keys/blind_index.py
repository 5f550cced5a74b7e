"""Blind indexes: the store finds an owner's or a turn's rows by HMAC tags, never by the names themselves, and a
row by its id, which encrypts the row's position (threat_model.md, "Row ids")."""

from __future__ import annotations

import hmac
import struct
from typing import NoReturn

from keys.crypto import kdf
from keys.crypto.aead import KEY_SIZE, NONCE_SIZE, Aead, BlockPermutation, random_bytes
from keys.crypto.encoding import encode_fields
from keys.crypto.labels import (
    AUDIT_KEY,
    AUDIT_TAG,
    INDEX_KEY_CHECK,
    LEDGER,
    LEDGER_KEY,
    OWNER_NAME,
    OWNER_NAME_KEY,
    OWNER_TAG,
    ROW_ID_KEY,
    TURN_TAG,
)
from keys.errors import IntegrityError
from keys.keyring.entries import serialize_single_key
from keys.keyring.secret import Secret

TAG_SIZE = 32
TAG_CACHE_SIZE = 4096
AUDIT_TAG_BYTES = 16  # 128 bits: no collisions among any realistic number of identifiers
ROW_SEQ_BYTES = 8  # a row id is one AES block: the row's seq (8 bytes) and 8 random bytes


class IndexKey:
    """The vault-wide HMAC-SHA256 key for owner and turn tags (held in the keyring, cached here)."""

    __slots__ = ("_ledger_key", "_raw", "_row_ids", "_tags")

    def __init__(self, raw: bytes) -> None:
        if len(raw) != KEY_SIZE:
            raise IntegrityError("index key has the wrong length")
        self._raw = bytes(raw)
        self._tags: dict[tuple[str, bytes, str], bytes] = {}  # recent tags: every call computes two
        # subkeys expanded from the uniformly random index key, each for one use: row ids, deletion ledgers
        self._row_ids = BlockPermutation(kdf.expand(self._raw, ROW_ID_KEY))
        self._ledger_key = kdf.expand(self._raw, LEDGER_KEY)

    def row_id(self, seq: int) -> bytes:
        """A new id for the row stored at ``seq``: AES-256 of (seq, 64 random bits). Ids look random and say
        nothing of the order rows were written in, yet lead to their row without an index on random ids."""
        return self._row_ids.encrypt(seq.to_bytes(ROW_SEQ_BYTES, "big") + random_bytes(ROW_SEQ_BYTES))

    def row_seq(self, row_id: bytes) -> int:
        """The seq a row id was made for. Any 16 bytes decrypt to some seq, and a seq is reused once its row is
        gone, so the caller must compare the whole stored id before it trusts the row."""
        return int.from_bytes(self._row_ids.decrypt(row_id)[:ROW_SEQ_BYTES], "big")

    def row_seqs(self, row_ids: list[bytes]) -> list[int]:
        """:meth:`row_seq` of each id (a listing checks every row it shows); an id of another length is damage.
        One AES call and one unpack for all of them."""
        if set(map(len, row_ids)) - {2 * ROW_SEQ_BYTES}:
            raise IntegrityError("a stored row id has the wrong length")
        plain = self._row_ids.decrypt_each(b"".join(row_ids))
        return list(struct.unpack(">" + "Q8x" * len(row_ids), plain))  # each block: its seq, then 8 random bytes

    def owner_tag(self, user_id: str) -> bytes:
        """Tag of an owner: equal user ids (compared exactly, no normalisation) give equal tags."""
        return self._tag("owner", b"", user_id)

    def turn_tag(self, owner_tag: bytes, turn_id: str) -> bytes:
        """Tag of a turn within one owner: two owners' turns with the same name never share a tag."""
        return self._tag("turn", owner_tag, turn_id)

    def _tag(self, kind: str, owner_tag: bytes, name: str) -> bytes:
        key = (kind, owner_tag, name)
        tag = self._tags.get(key)
        if tag is None:
            if kind == "owner":
                tag = kdf.mac(self._raw, encode_fields(OWNER_TAG, name.encode()))
            else:
                tag = kdf.mac(self._raw, encode_fields(TURN_TAG, owner_tag, name.encode()))
            if len(self._tags) >= TAG_CACHE_SIZE:
                self._tags.clear()  # bounded; tags are cheap to recompute
            self._tags[key] = tag
        return tag

    def ledger_tag(self, vault_id: bytes, owner_tag: bytes, counter: int, body: bytes) -> bytes:
        """HMAC-SHA256 of one owner's deletion ledger (its counter and body) under the ledger key: binds the vault
        and the owner, so a ledger cannot be moved to another owner or vault (threat_model.md, "Rollback")."""
        message = encode_fields(LEDGER, vault_id, owner_tag, counter.to_bytes(8, "big"), body)
        return kdf.mac(self._ledger_key, message)

    def seal_name(self, vault_id: bytes, owner_tag: bytes, user_id: str) -> bytes:
        """Seal an owner's name for the owner registry (so maintenance can enumerate owners)."""
        nonce = random_bytes(NONCE_SIZE)
        return nonce + self._name_cipher().seal(nonce, user_id.encode(), self._name_aad(vault_id, owner_tag))

    def open_name(self, vault_id: bytes, owner_tag: bytes, sealed: bytes) -> str:
        """Open a registry entry; it must belong to this vault and tag, and the tag must match the name."""
        plain = self._name_cipher().open(sealed[:NONCE_SIZE], sealed[NONCE_SIZE:], self._name_aad(vault_id, owner_tag))
        try:
            user_id = plain.decode("utf-8", "strict")
        except UnicodeDecodeError:  # authenticated, yet no name seal_name makes: damage, within VaultError
            raise IntegrityError("an owner registry entry is not UTF-8") from None
        if not tags_equal(self.owner_tag(user_id), owner_tag):
            raise IntegrityError("an owner registry entry does not match its tag")
        return user_id

    def audit_tag(self, kind: str, value: str) -> str:
        """Keyed tag (hex) of an identifier for the audit trail: equal (kind, value) give equal tags, so an
        auditor can follow one user; without the keyring a tag names no one. Its key is derived apart from
        the owner-tag key, so a tag is not an owner_tag; but records carry row ids, so whoever holds both the
        log and a copy of the database can match audit pseudonyms to owner tags (still not to names)."""
        message = encode_fields(AUDIT_TAG, kind.encode(), value.encode("utf-8", "surrogatepass"))
        return kdf.mac(self._audit_key(), message)[:AUDIT_TAG_BYTES].hex()

    def _audit_key(self) -> bytes:
        return kdf.expand(self._raw, AUDIT_KEY)  # a subkey only for audit tags

    def _name_cipher(self) -> Aead:
        return Aead(kdf.expand(self._raw, OWNER_NAME_KEY))  # a subkey only for sealed owner names

    @staticmethod
    def _name_aad(vault_id: bytes, owner_tag: bytes) -> bytes:
        return encode_fields(OWNER_NAME, vault_id, owner_tag)

    def serialize(self) -> Secret:
        """The keyring entry of this key."""
        return serialize_single_key(self._raw)

    def commitment(self, vault_id: bytes) -> bytes:
        """A commitment to this key, stored in the database to detect a keyring that swapped it."""
        return kdf.mac(self._raw, encode_fields(INDEX_KEY_CHECK, vault_id))

    def __repr__(self) -> str:
        return "<IndexKey>"

    def __reduce__(self) -> NoReturn:
        raise TypeError("key material cannot be pickled")


def tags_equal(left: bytes, right: bytes) -> bool:
    """Constant-time comparison of two tags."""
    return hmac.compare_digest(left, right)
