"""scratchvault: an encrypted-at-rest, ownership-checked store for large agent tool outputs."""

from keys import TrialKeyringWarning
from vault.engine.tool import SCRATCHPAD_READ_TOOL, tool_declaration
from vault.errors import (
    IntegrityError,
    InvalidArgument,
    KeyUnavailable,
    NotFound,
    QuotaExceeded,
    StorageError,
    UnsafeStorage,
    VaultError,
)
from vault.model import Principal, ReadResult, Record, Representation
from vault.row.finding import FindResult, Match
from vault.vault import Vault

__all__ = [
    "SCRATCHPAD_READ_TOOL",
    "FindResult",
    "IntegrityError",
    "InvalidArgument",
    "KeyUnavailable",
    "Match",
    "NotFound",
    "Principal",
    "QuotaExceeded",
    "ReadResult",
    "Record",
    "Representation",
    "StorageError",
    "TrialKeyringWarning",
    "UnsafeStorage",
    "Vault",
    "VaultError",
    "tool_declaration",
]
