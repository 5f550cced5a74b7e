"""Re-export of the error hierarchy defined at the bottom, in ``keys/errors.py``."""

from keys.errors import (
    IntegrityError,
    InvalidArgument,
    KeyUnavailable,
    NotFound,
    StorageError,
    UnsafeStorage,
    VaultError,
)

__all__ = [
    "IntegrityError",
    "InvalidArgument",
    "KeyUnavailable",
    "NotFound",
    "StorageError",
    "UnsafeStorage",
    "VaultError",
]
