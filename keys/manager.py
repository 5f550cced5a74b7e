"""KeyManager: the one façade ``vault/`` uses for key material (index key, owner keysets, data keys).

Keyring layout: service ``scratchvault/<vault_id hex>/index`` user ``index`` holds the index key; service
``scratchvault/<vault_id hex>/owner`` user ``<user_id>`` holds that owner's keyset. ``vault_id`` keeps two
vaults on one keyring apart. Lookups are cached (bounded size and lifetime) and the cache is cleared on close;
a keyset loaded from the keyring is checked against the key commitments the database recorded before use.
"""

from __future__ import annotations

from collections.abc import Callable

from keys.aead import KEY_SIZE, random_bytes
from keys.blind_index import IndexKey, tags_equal
from keys.cache import KeyCache
from keys.datakey import DataKey
from keys.errors import KeyUnavailable
from keys.keyring_store import KeyringStore
from keys.keyset import OwnerKeyset, parse_single_key, serialize_single_key

_INDEX = ("index",)


class KeyManager:
    """Fetches, creates and caches this vault's keys in the OS keyring."""

    def __init__(self, store: KeyringStore, vault_id: bytes, *, cache_ttl: float, cache_size: int,
                 commitments: Callable[[bytes], dict[int, bytes]] | None = None) -> None:
        self._store = store
        self._commitments = commitments
        self._vault_id = vault_id
        self._cache: KeyCache[object] = KeyCache(cache_size, cache_ttl)
        prefix = "scratchvault/" + vault_id.hex()
        self._index_service = prefix + "/index"
        self._owner_service = prefix + "/owner"

    @property
    def backend_name(self) -> str:
        """Which keyring backend is in use."""
        return self._store.backend_name

    @property
    def vault_id(self) -> bytes:
        """The vault this manager's keys belong to."""
        return self._vault_id

    def index_key(self) -> IndexKey:
        """The vault's index key; its absence is an error (it is made once, with the database)."""
        cached = self._cache.get(_INDEX)
        if isinstance(cached, IndexKey):
            return cached
        stored = self._store.get(self._index_service, "index")
        if stored is None:
            raise KeyUnavailable(
                "this vault's index key is missing from the OS keyring (wrong keyring, or it was deleted); "
                "restore the keyring from backup. Without it no row can be found; a new key is never made "
                "over an existing vault"
            )
        key = IndexKey(parse_single_key(stored, "vault index key"))
        self._cache.put(_INDEX, key)
        return key

    def index_key_exists(self) -> bool:
        """Whether the keyring holds an index key for this vault (used only when the database is new)."""
        return self._store.get(self._index_service, "index") is not None

    def create_index_key(self) -> IndexKey:
        """Make and store the index key of a new vault."""
        raw = random_bytes(KEY_SIZE)
        self._store.set(self._index_service, "index", serialize_single_key(raw))
        key = IndexKey(raw)
        self._cache.put(_INDEX, key)
        return key

    def owner_keyset(self, user_id: str, *, refresh: bool = False) -> OwnerKeyset | None:
        """The owner's keyset, or None when the keyring has none; ``refresh`` bypasses the cache."""
        if not refresh:
            cached = self._cache.get(("owner", user_id))
            if isinstance(cached, OwnerKeyset):
                return cached
        stored = self._store.get(self._owner_service, user_id)
        if stored is None:
            self._cache.invalidate(("owner", user_id))
            return None
        keyset = OwnerKeyset.parse(stored)
        self._check_commitments(user_id, keyset)
        self._cache.put(("owner", user_id), keyset)
        return keyset

    def _check_commitments(self, user_id: str, keyset: OwnerKeyset) -> None:
        """Compare a freshly loaded keyset with the key commitments the database recorded for this owner."""
        if self._commitments is None:
            return
        recorded = self._commitments(self.index_key().owner_tag(user_id))
        for version in keyset.versions:
            expected = recorded.get(version)
            if expected is not None and not tags_equal(expected, self.key_check(keyset, version)):
                raise KeyUnavailable(
                    "the OS keyring returned a different key for this owner than the one this vault recorded "
                    "(the keyring entry was replaced, or this is another keyring); restore it from the backup"
                )

    def create_owner_keyset(self, user_id: str) -> OwnerKeyset:
        """Make and store a keyset for an owner the vault has never seen (the caller holds the write lock)."""
        keyset = OwnerKeyset.generate()
        self._store.set(self._owner_service, user_id, keyset.serialize())
        self._cache.put(("owner", user_id), keyset)
        return keyset

    def key_check(self, keyset: OwnerKeyset, version: int) -> bytes:
        """Commitment to one of ``keyset``'s versions, bound to this vault."""
        return keyset.check_value(version, self._vault_id)

    @staticmethod
    def new_data_key() -> DataKey:
        """A fresh random data key for one row."""
        return DataKey.generate()

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
