"""KeyManager: the one façade ``vault/`` uses for key material (index key, owner keysets, data keys).

Keyring layout: service ``scratchvault/<vault_id hex>/index`` user ``index`` holds the index key; service
``scratchvault/<vault_id hex>/owner`` user ``<owner tag hex>`` holds that owner's keyset. ``vault_id`` keeps two
vaults on one keyring apart. Lookups are cached (bounded size and lifetime) and the cache is cleared on close.
Every key loaded from the keyring is checked against the commitments the database recorded for it (recorded
on first sight): a keyring that returns a different or truncated key is KeyUnavailable, not "tampering".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from keys.aead import KEY_SIZE, random_bytes
from keys.blind_index import IndexKey, tags_equal
from keys.cache import KeyCache
from keys.errors import KeyUnavailable
from keys.keyring_edge import KeyringEdge
from keys.keyset import OwnerKeyset, parse_single_key

_INDEX = ("index",)
NO_OWNER_KEYS = "the OS keyring holds no keys for this owner"
_REPLACED = ("the OS keyring returned a different {what} than the one this vault recorded (the entry was "
             "replaced, truncated, or this is another keyring); restore it from the keyring backup")


class KeyCommitments(Protocol):
    """Where the database keeps commitments to keys. The store implements it; every write joins the write
    transaction the calling thread has open, else runs in one of its own (vault/storage/base.py)."""

    def owner_commitments(self, owner_tag: bytes) -> dict[int, bytes]:
        """Recorded commitments of one owner's key versions."""

    def record_owner_commitment(self, owner_tag: bytes, version: int, value: bytes, sealed_name: bytes) -> None:
        """Record a commitment and register the owner (inside the caller's transaction if one is open)."""

    def forget_owner_commitments(self, owner_tag: bytes, versions: set[int] | None) -> None:
        """Drop the commitments of retired versions (None: all, and the owner's registration)."""

    def registered_owners(self) -> list[tuple[bytes, bytes]]:
        """(owner tag, sealed name) of every owner that ever had a keyset here."""

    def key_versions_in_use(self, owner_tag: bytes) -> dict[int, int]:
        """How many rows each key version of an owner still wraps."""

    def index_commitment(self) -> bytes | None:
        """The recorded commitment of the index key."""

    def record_index_commitment(self, value: bytes) -> None:
        """Record the index key's commitment."""


class KeyManager:
    """Fetches, creates, checks and caches this vault's keys in the OS keyring."""

    def __init__(self, keyring: KeyringEdge, vault_id: bytes, commitments: KeyCommitments, *, cache_ttl: float,
                 cache_size: int) -> None:
        self._keyring = keyring
        self._vault_id = vault_id
        self._commitments = commitments
        self._cache: KeyCache[object] = KeyCache(cache_size, cache_ttl)
        prefix = "scratchvault/" + vault_id.hex()
        self._index_service = prefix + "/index"
        self._owner_service = prefix + "/owner"

    @property
    def backend_name(self) -> str:
        """Which keyring backend is in use."""
        return self._keyring.backend_name

    @property
    def vault_id(self) -> bytes:
        """The vault this manager's keys belong to."""
        return self._vault_id

    def index_key(self) -> IndexKey:
        """The vault's index key; its absence is an error (it is made once, with the database)."""
        cached = self._cache.get(_INDEX)
        if isinstance(cached, IndexKey):
            return cached
        stored = self._keyring.get(self._index_service, "index")
        if stored is None:
            raise KeyUnavailable(
                "this vault's index key is missing from the OS keyring (wrong keyring, or it was deleted); "
                "restore the keyring from backup. Without it no row can be found; a new key is never made "
                "over an existing vault"
            )
        key = IndexKey(parse_single_key(stored, "vault index key"))
        recorded, commitment = self._commitments.index_commitment(), key.commitment(self._vault_id)
        if recorded is None:
            self._commitments.record_index_commitment(commitment)
        elif not tags_equal(recorded, commitment):
            raise KeyUnavailable(_REPLACED.format(what="index key"))
        self._cache.put(_INDEX, key)
        return key

    def cached_index_key(self) -> IndexKey | None:
        """The index key if it is in the cache, without asking the keyring (for work that must never wait on
        a failing keyring, such as an audit record of a KeyUnavailable)."""
        cached = self._cache.get(_INDEX)
        return cached if isinstance(cached, IndexKey) else None

    def create_index_key(self) -> IndexKey:
        """Make, store and record the index key of a new vault (inside the transaction that creates it)."""
        key = IndexKey(random_bytes(KEY_SIZE))
        self._keyring.set(self._index_service, "index", key.serialize())
        self._commitments.record_index_commitment(key.commitment(self._vault_id))
        self._cache.put(_INDEX, key)
        return key

    def owner_keyset(self, user_id: str, *, refresh: bool = False) -> OwnerKeyset | None:
        """The owner's keyset, or None when the keyring has none; ``refresh`` bypasses the cache."""
        if not refresh:
            cached = self._cache.get(("owner", user_id))
            if isinstance(cached, OwnerKeyset):
                return cached
        stored = self._keyring.get(self._owner_service, self._owner_entry(user_id))
        if stored is None:
            self._cache.invalidate(("owner", user_id))
            return None
        keyset = OwnerKeyset.parse(stored)
        self._check_owner_commitments(user_id, keyset)
        self._cache.put(("owner", user_id), keyset)
        return keyset

    def keyset_for_read(self, user_id: str, version: int) -> OwnerKeyset:
        """The keyset of an owner whose rows exist (reloaded once if ``version`` is unknown: rotated elsewhere?);
        its absence is KeyUnavailable, never a reason to make a new key."""
        keyset = self.owner_keyset(user_id)
        if keyset is not None and version not in keyset.versions:
            keyset = self.owner_keyset(user_id, refresh=True)
        if keyset is None:
            raise KeyUnavailable(
                f"{NO_OWNER_KEYS} although the vault holds rows for them (wrong keyring, or the entry was "
                "deleted); restore the keyring from backup. A new key is never generated over existing rows")
        return keyset

    def keyset_for_write(self, user_id: str, owner_tag: bytes, has_rows: Callable[[bytes], bool]) -> OwnerKeyset:
        """The owner's keyset from the keyring, or a new one for an owner the vault has never seen (no rows, no
        commitments). The caller holds the write lock: two writers never make two first keys."""
        keyset = self.owner_keyset(user_id, refresh=True)
        if keyset is not None:
            return keyset
        if has_rows(owner_tag) or self._commitments.owner_commitments(owner_tag):
            raise KeyUnavailable(f"{NO_OWNER_KEYS} although this vault already knows them; restore the keyring "
                                 "from backup (a new key would orphan that owner's rows)")
        return self.create_owner_keyset(user_id)

    def create_owner_keyset(self, user_id: str) -> OwnerKeyset:
        """Make, store and record a keyset for a new owner (the caller holds the database write lock)."""
        return self._store_keyset(user_id, OwnerKeyset.generate())

    def rotate_owner_keyset(self, user_id: str) -> OwnerKeyset:
        """Add a random version and make it primary (the caller holds the database write lock)."""
        keyset = self.owner_keyset(user_id, refresh=True)
        if keyset is None:
            raise KeyUnavailable(f"{NO_OWNER_KEYS}; nothing to rotate (restore the keyring from backup if the vault "
                                 "holds rows for them)")
        return self._store_keyset(user_id, keyset.with_new_version())

    def retire_owner_versions(self, user_id: str, versions: set[int]) -> OwnerKeyset:
        """Remove ``versions`` from the owner's keyset and forget their commitments (caller holds the lock
        and has checked that no row needs them)."""
        keyset = self.owner_keyset(user_id, refresh=True)
        if keyset is None:
            raise KeyUnavailable(f"{NO_OWNER_KEYS}; nothing to retire")
        owner_tag = self.index_key().owner_tag(user_id)
        self._commitments.forget_owner_commitments(owner_tag, versions)
        smaller = keyset.without_versions(versions)
        self._keyring.set(self._owner_service, self._owner_entry(user_id), smaller.serialize())
        self._cache.put(("owner", user_id), smaller)
        return smaller

    def delete_owner_keyset(self, user_id: str) -> None:
        """Crypto-shred: delete the owner's keyset from the keyring; every copy of their rows is unreadable."""
        self._cache.invalidate(("owner", user_id))
        self._keyring.delete(self._owner_service, self._owner_entry(user_id))
        self._commitments.forget_owner_commitments(self.index_key().owner_tag(user_id), None)

    def is_current(self, keyset: OwnerKeyset, recorded: bytes | None) -> bool:
        """Whether ``recorded``, the commitment the database holds for this keyset's primary version (None if it
        holds none), is exactly this key's: false after a retirement, a shred, or a shred and re-creation
        (version numbers restart) in another process. A put reads it in the statement that gives it its seq.
        """
        return recorded is not None and tags_equal(recorded, self._owner_commitment(keyset, keyset.primary))

    def registered_owner_names(self) -> list[str]:
        """The user ids of every registered owner (opened from the registry with the index key)."""
        index = self.index_key()
        return [index.open_name(self._vault_id, tag, sealed) for tag, sealed in self._commitments.registered_owners()]

    def _store_keyset(self, user_id: str, keyset: OwnerKeyset) -> OwnerKeyset:
        """Write a keyset (read back by the store) and record its primary version's commitment."""
        self._keyring.set(self._owner_service, self._owner_entry(user_id), keyset.serialize())
        owner_tag = self.index_key().owner_tag(user_id)
        commitment = self._owner_commitment(keyset, keyset.primary)
        self._commitments.record_owner_commitment(owner_tag, keyset.primary, commitment,
                                                  self._sealed_name(owner_tag, user_id))
        self._cache.put(("owner", user_id), keyset)
        return keyset

    def _sealed_name(self, owner_tag: bytes, user_id: str) -> bytes:
        return self.index_key().seal_name(self._vault_id, owner_tag, user_id)

    def _owner_entry(self, user_id: str) -> str:
        """The keyring user name of an owner's keyset: the owner tag in hex, so the keyring lists no user ids
        and a backend that folds case or truncates names cannot merge two owners."""
        return self.index_key().owner_tag(user_id).hex()

    def _check_owner_commitments(self, user_id: str, keyset: OwnerKeyset) -> None:
        """Recorded versions must all be there and match; versions seen for the first time are recorded."""
        owner_tag = self.index_key().owner_tag(user_id)
        recorded = self._commitments.owner_commitments(owner_tag)
        missing = set(recorded) - set(keyset.versions)
        if missing:
            if missing & set(self._commitments.key_versions_in_use(owner_tag)):
                raise KeyUnavailable(_REPLACED.format(what="keyset for this owner (a recorded key version is missing)"))
            # versions no row uses: a retirement whose keyring write landed but whose commit did not
            self._commitments.forget_owner_commitments(owner_tag, missing)
        for version in keyset.versions:
            commitment = self._owner_commitment(keyset, version)
            if version not in recorded:
                self._commitments.record_owner_commitment(owner_tag, version, commitment,
                                                          self._sealed_name(owner_tag, user_id))
            elif not tags_equal(recorded[version], commitment):
                raise KeyUnavailable(_REPLACED.format(what="key for this owner"))

    def _owner_commitment(self, keyset: OwnerKeyset, version: int) -> bytes:
        return keyset.commitment(version, self._vault_id)

    @staticmethod
    def new_vault_id() -> bytes:
        """A random id for a new vault: it keeps two vaults on one keyring apart and is in every AAD."""
        return random_bytes(16)

    def forget(self, user_id: str) -> None:
        """Drop an owner's keyset from the cache."""
        self._cache.invalidate(("owner", user_id))

    def close(self) -> None:
        """Drop every cached key."""
        self._cache.clear()

    def __repr__(self) -> str:
        return f"<KeyManager backend={self.backend_name}>"

    def __reduce__(self) -> object:
        raise TypeError("key material cannot be pickled")
