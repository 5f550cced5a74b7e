"""Everything that touches key material: the AEAD, the row envelope, keysets, the keyring edge and the cache.

``vault/`` uses :class:`KeyManager`, the opaque :class:`DataKey` and :class:`IndexKey` handles and the
envelope's AAD builders; raw key bytes never leave this package.
"""

from keys.blind_index import IndexKey, tags_equal
from keys.datakey import DataKey
from keys.errors import (
    IntegrityError,
    InvalidArgument,
    KeyUnavailable,
    NotFound,
    StorageError,
    UnsafeStorage,
    VaultError,
)
from keys.keyring_store import KeyringStore, resolve_backend
from keys.keyset import OwnerKeyset
from keys.manager import KeyManager

__all__ = [
    "DataKey",
    "IndexKey",
    "IntegrityError",
    "InvalidArgument",
    "KeyManager",
    "KeyUnavailable",
    "KeyringStore",
    "NotFound",
    "OwnerKeyset",
    "StorageError",
    "UnsafeStorage",
    "VaultError",
    "resolve_backend",
    "tags_equal",
]
