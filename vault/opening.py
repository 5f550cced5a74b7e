"""Opening a vault: its settings checked, its store opened, and its key manager (a new database gets its vault id
and index key in one transaction, so no vault exists with one and not the other)."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import TypedDict

from keyring.backend import KeyringBackend

from keys import DEFAULT_EPOCH_SECONDS as EPOCH_SECONDS
from keys import DEFAULT_SKEW_SECONDS as EPOCH_SKEW_SECONDS
from keys import (
    TRIAL_KEYRING,
    TRIAL_WARNING,
    CacheLimits,
    DeletionLedgers,
    KeyManager,
    KeyringEdge,
    TrialKeyringWarning,
    check_length,
    check_skew,
    resolve_backend,
)
from vault.errors import IntegrityError, InvalidArgument
from vault.inputs import check_int, check_positive_setting
from vault.quotas import MAX_SETTING, OwnerQuotas
from vault.storage import Store, open_store

DEFAULT_MAX_TTL = 30 * 24 * 3600.0
DEFAULT_KEY_CACHE_SECONDS = 300.0
MAX_KEY_CACHE_SECONDS = 3600.0  # keys stay in memory at most this long after a keyring read
DEFAULT_KEYRING_TIMEOUT = 10.0  # seconds one keyring call may take before it is KeyUnavailable
DEFAULT_KEY_CACHE_SIZE = 1024
DEFAULT_MAX_READ = 16000
MAX_READ_LIMIT = 10_000_000


class SettingsOptions(TypedDict, total=False):
    """The keyword settings of ``Vault.open``, each a field of :class:`OpenSettings`."""

    clock: Callable[[], float]
    max_read: int
    max_ttl_seconds: float
    key_cache_seconds: float
    key_cache_size: int
    keyring_timeout: float
    disk_reserve_bytes: int | None
    owner_max_rows: int | None
    owner_max_bytes: int | None
    pool_size: int | None
    epoch_seconds: int
    epoch_skew_seconds: int


class OpenOptions(SettingsOptions, total=False):
    """Every keyword of ``Vault.open``: the keyring backend and the settings."""

    keyring_backend: KeyringBackend | str | None


def warns_of_a_trial_keyring(backend: object, stacklevel: int) -> bool:
    """Whether ``backend`` names the trial keyring; if so, warn that its keys die with the process, naming the
    line ``stacklevel`` frames up from the caller (1: the caller itself), which is the user's: the warning is
    shown once a location, so it must never name the vault's own."""
    trial = isinstance(backend, str) and backend == TRIAL_KEYRING
    if trial:
        warnings.warn(TRIAL_WARNING, TrialKeyringWarning, stacklevel=stacklevel + 1)
    return trial


def split_options(options: OpenOptions) -> tuple[KeyringBackend | str | None, OpenSettings]:
    """The backend and the settings ``Vault.open`` was given; a keyword it does not take is a TypeError, as for
    any Python function. Choosing the trial keyring warns, naming the caller's line of ``Vault.open``."""
    backend = options.get("keyring_backend")
    warns_of_a_trial_keyring(backend, 3)  # 1: here, 2: Vault.open, 3: its caller
    given = {name: value for name, value in options.items() if name != "keyring_backend"}
    known = {field.name for field in fields(OpenSettings)}
    for name in given:
        if name not in known:
            raise TypeError(f"Vault.open() got an unexpected keyword argument {name!r}")
    return backend, OpenSettings(**given)  # type: ignore[arg-type]  # names checked above


@dataclass(frozen=True)
class OpenSettings:
    """The settings of ``Vault.open`` (README, "Disk space and quotas", "Several hosts", "What expiry means"),
    as given: :meth:`check` refuses any that is invalid before anything is opened or written."""

    clock: Callable[[], float] = time.time
    max_read: int = DEFAULT_MAX_READ
    max_ttl_seconds: float = DEFAULT_MAX_TTL
    key_cache_seconds: float = DEFAULT_KEY_CACHE_SECONDS
    key_cache_size: int = DEFAULT_KEY_CACHE_SIZE
    keyring_timeout: float = DEFAULT_KEYRING_TIMEOUT
    disk_reserve_bytes: int | None = None  # SQLite; None: the default for the file system
    owner_max_rows: int | None = None  # None: no quota
    owner_max_bytes: int | None = None
    pool_size: int | None = None  # PostgreSQL; None: the store's default
    epoch_seconds: int = EPOCH_SECONDS
    epoch_skew_seconds: int = EPOCH_SKEW_SECONDS

    def check(self) -> OwnerQuotas:
        """Every setting valid (the pool size is checked with the location it applies to); returns the owner
        quotas."""
        check_length(self.epoch_seconds)
        check_skew(self.epoch_skew_seconds)
        check_int(self.max_read, "max_read", 1, MAX_READ_LIMIT)
        check_positive_setting(self.max_ttl_seconds, "max_ttl_seconds")
        if check_positive_setting(self.key_cache_seconds, "key_cache_seconds") > MAX_KEY_CACHE_SECONDS:
            raise InvalidArgument(f"key_cache_seconds must be at most {MAX_KEY_CACHE_SECONDS:g}")
        check_int(self.key_cache_size, "key_cache_size", 1, 1_000_000)
        if not callable(self.clock):
            raise InvalidArgument("clock must be a callable returning seconds")
        check_positive_setting(self.keyring_timeout, "keyring_timeout")
        if self.disk_reserve_bytes is not None:
            check_int(self.disk_reserve_bytes, "disk_reserve_bytes", 0, MAX_SETTING)
        return OwnerQuotas.checked(self.owner_max_rows, self.owner_max_bytes)


def open_parts(location: object, backend: KeyringBackend | str | None,
               settings: OpenSettings) -> tuple[Store, KeyManager, DeletionLedgers]:
    """The store at ``location``, its key manager (the index key already fetched and checked: a missing or
    replaced one fails here, not on first use; the owners' key version marks written once from the database if no
    release before wrote them) and its owners' counts of deletes in the keyring. Refuses an unacceptable keyring
    before the store is touched."""
    resolved = resolve_backend(backend)
    bound = getattr(resolved, "bound_timeout", None)  # a backend with its own request timeout (keys/openbao)
    if callable(bound):
        bound(float(settings.keyring_timeout))
    keyring = KeyringEdge(resolved, timeout=float(settings.keyring_timeout))
    store = open_store(location, settings.disk_reserve_bytes, settings.pool_size)
    try:
        keys = _key_manager(store, keyring, settings)
        keys.index_key()
        keys.adopt_owner_marks()
    except BaseException:
        store.close()
        raise
    return store, keys, DeletionLedgers(keyring, keys.vault_id)


def _key_manager(store: Store, keyring: KeyringEdge, settings: OpenSettings) -> KeyManager:
    """The key manager of this database; a new database gets its vault id and index key atomically."""
    make: Callable[[bytes], KeyManager] = lambda vault_id: KeyManager(  # noqa: E731
        keyring, vault_id, store.commitments, cache=CacheLimits(settings.key_cache_seconds, settings.key_cache_size),
        epoch_seconds=settings.epoch_seconds,
        epoch_skew_seconds=settings.epoch_skew_seconds)
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
