"""The error hierarchy, defined at the bottom (``keys/errors.py``) and re-exported here for ``vault/``."""

from keys.errors import (
    IntegrityError,
    InvalidArgument,
    KeyUnavailable,
    NotFound,
    QuotaExceeded,
    StorageError,
    UnsafeStorage,
    VaultError,
)

__all__ = [
    "IntegrityError",
    "InvalidArgument",
    "KeyUnavailable",
    "NotFound",
    "QuotaExceeded",
    "StorageError",
    "UnsafeStorage",
    "VaultError",
]
