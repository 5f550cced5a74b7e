"""The one error hierarchy of scratchvault.

Defined here, at the bottom, importing nothing, so that ``keys/`` never imports ``vault/``; ``vault`` re-exports
these names. Messages never carry content, summaries, identifiers' values or key bytes.
"""


class VaultError(Exception):
    """Base of every error the public API raises; nothing else escapes it."""


class InvalidArgument(VaultError, ValueError):
    """A caller passed a value the API does not accept; nothing was stored or changed."""


class NotFound(VaultError, LookupError):
    """Missing, expired and owned-by-someone-else: deliberately one error with one message."""

    MESSAGE = "no such observation"

    def __init__(self) -> None:
        super().__init__(self.MESSAGE)


class IntegrityError(VaultError):
    """Stored bytes failed authentication or a consistency check: treated as tampering, never as absence."""


class KeyUnavailable(VaultError):
    """The key store cannot be used safely; the message says how to fix it. Nothing was written."""


class UnsafeStorage(VaultError):
    """The database path or its directory has permissions (or a symlink) that other accounts could abuse."""


class StorageError(VaultError):
    """The database failed for a reason that is neither tampering nor a bad argument (busy, disk full, closed)."""


class QuotaExceeded(StorageError):
    """A put was refused before anything was stored: it would leave less free space on the database's file
    system than the vault's reserve, or pass its owner's row or byte quota. The message says which and how much."""
