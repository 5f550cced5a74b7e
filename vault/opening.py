"""Opening a vault: its settings checked, its store opened, and its key manager (a new database gets its vault id
and index key in one transaction, so no vault exists with one and not the other)."""

from __future__ import annotations

from collections.abc import Callable

from keyring.backend import KeyringBackend

from keys import DeletionLedgers, KeyManager, KeyringEdge, resolve_backend
from keys.epochs import DEFAULT_EPOCH_SECONDS as EPOCH_SECONDS
from keys.epochs import DEFAULT_SKEW_SECONDS as EPOCH_SKEW_SECONDS
from keys.epochs import check_length, check_skew
from vault.errors import IntegrityError, InvalidArgument
from vault.inputs import check_int, check_positive_setting
from vault.quotas import MAX_SETTING, OwnerQuotas
from vault.storage import Store, open_store

DEFAULT_MAX_TTL = 30 * 24 * 3600.0
DEFAULT_KEY_CACHE_SECONDS = 300.0
MAX_KEY_CACHE_SECONDS = 3600.0  # keys stay in memory at most this long after a keyring read
DEFAULT_KEYRING_TIMEOUT = 10.0  # seconds one keyring call may take before it is KeyUnavailable
DEFAULT_KEY_CACHE_SIZE = 1024
MAX_READ_LIMIT = 10_000_000


def check_settings(clock: object, max_read: object, max_ttl_seconds: object, key_cache_seconds: object,
                   key_cache_size: object, keyring_timeout: object, disk_reserve_bytes: object = None,
                   owner_max_rows: object = None, owner_max_bytes: object = None,
                   epochs: tuple[object, object] = (EPOCH_SECONDS, EPOCH_SKEW_SECONDS)) -> OwnerQuotas:
    """Every setting of ``Vault.open`` valid, before anything is opened or written; returns the owner quotas."""
    check_length(epochs[0])
    check_skew(epochs[1])
    check_int(max_read, "max_read", 1, MAX_READ_LIMIT)
    check_positive_setting(max_ttl_seconds, "max_ttl_seconds")
    if check_positive_setting(key_cache_seconds, "key_cache_seconds") > MAX_KEY_CACHE_SECONDS:
        raise InvalidArgument(f"key_cache_seconds must be at most {MAX_KEY_CACHE_SECONDS:g}")
    check_int(key_cache_size, "key_cache_size", 1, 1_000_000)
    if not callable(clock):
        raise InvalidArgument("clock must be a callable returning seconds")
    check_positive_setting(keyring_timeout, "keyring_timeout")
    if disk_reserve_bytes is not None:
        check_int(disk_reserve_bytes, "disk_reserve_bytes", 0, MAX_SETTING)
    return OwnerQuotas.checked(owner_max_rows, owner_max_bytes)


def open_parts(location: object, backend: KeyringBackend | str | None, key_cache_seconds: float, key_cache_size: int,
               keyring_timeout: float, disk_reserve_bytes: int | None = None, pool_size: int | None = None,
               epochs: tuple[int, int] = (EPOCH_SECONDS, EPOCH_SKEW_SECONDS)
               ) -> tuple[Store, KeyManager, DeletionLedgers]:
    """The store at ``location``, its key manager (the index key already fetched and checked: a missing or
    replaced one fails here, not on first use; the owners' key version marks written once from the database if no
    release before wrote them) and its owners' counts of deletes in the keyring. Refuses an unacceptable keyring
    before the store is touched."""
    resolved = resolve_backend(backend)
    bound = getattr(resolved, "bound_timeout", None)  # a backend with its own request timeout (keys/openbao)
    if callable(bound):
        bound(float(keyring_timeout))
    keyring = KeyringEdge(resolved, timeout=float(keyring_timeout))
    store = open_store(location, disk_reserve_bytes, pool_size)
    try:
        keys = _key_manager(store, keyring, key_cache_seconds, key_cache_size, epochs)
        keys.index_key()
        keys.adopt_owner_marks()
    except BaseException:
        store.close()
        raise
    return store, keys, DeletionLedgers(keyring, keys.vault_id)


def _key_manager(store: Store, keyring: KeyringEdge, cache_seconds: float, cache_size: int,
                 epochs: tuple[int, int]) -> KeyManager:
    """The key manager of this database; a new database gets its vault id and index key atomically."""
    make: Callable[[bytes], KeyManager] = lambda vault_id: KeyManager(  # noqa: E731
        keyring, vault_id, store.commitments, cache_ttl=cache_seconds, cache_size=cache_size,
        epoch_seconds=epochs[0], epoch_skew_seconds=epochs[1])
    existing = store.get_meta("vault_id")
    if existing is not None:
        return make(existing)
    with store.transaction() as tx:
        existing = store.get_meta("vault_id")
        if existing is not None:
            return make(existing)
        if not store.is_empty():
            raise IntegrityError("the database holds rows or keys but no vault id; refusing to start a new vault "
                                 "over them (restore the database from backup)")
        keys = make(KeyManager.new_vault_id())
        keys.create_index_key()
        tx.put_meta("vault_id", keys.vault_id)
    return keys
