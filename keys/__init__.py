"""Everything that touches key material: the AEAD, the row recipe, keysets, the keyring edge and the cache.

``vault/`` uses only what this module exports: the :class:`KeyManager`, the :class:`RowRecipe` that seals and
opens rows (it never builds a nonce or an AAD), and the :class:`IndexKey` of blind tags and row ids; raw key
bytes never leave this package.
"""

from keys.blind_index import IndexKey, tags_equal
from keys.commitments import KeyCommitments, KeyRecords
from keys.epochs.schedule import (
    DEFAULT_EPOCH_SECONDS,
    DEFAULT_SKEW_SECONDS,
    MAX_EPOCH_SECONDS,
    MIN_EPOCH_SECONDS,
    check_length,
    check_skew,
    epoch_end,
)
from keys.formats.context import SealedRow
from keys.formats.dispatch import stored_epoch
from keys.formats.stream import CHUNK_BYTES
from keys.formats.v3 import WRAPPED_V3_SIZE as EPOCH_WRAPPED_SIZE
from keys.keyring.cache import CacheLimits
from keys.keyring.edge import KeyringEdge, resolve_backend
from keys.keyring.entries import MAX_VERSION as MAX_KEY_VERSION
from keys.keyring.memory import TRIAL as TRIAL_KEYRING
from keys.keyring.memory import TRIAL_WARNING, TrialKeyringWarning
from keys.ledger import DeletionLedgers, Ledger, SealedLedger
from keys.manager import NO_OWNER_KEYS, KeyManager
from keys.owner_keyset import OwnerKeyset
from keys.recipe import EPOCH_CLOSED, NewRow, OpenedRow, RowRecipe, RowWriter, SealingEpoch
from keys.turn_summaries import TurnSummaries

__all__ = [
    "CHUNK_BYTES",
    "DEFAULT_EPOCH_SECONDS",
    "DEFAULT_SKEW_SECONDS",
    "EPOCH_CLOSED",
    "EPOCH_WRAPPED_SIZE",
    "MAX_EPOCH_SECONDS",
    "MAX_KEY_VERSION",
    "MIN_EPOCH_SECONDS",
    "NO_OWNER_KEYS",
    "TRIAL_KEYRING",
    "TRIAL_WARNING",
    "CacheLimits",
    "DeletionLedgers",
    "IndexKey",
    "KeyCommitments",
    "KeyManager",
    "KeyRecords",
    "KeyringEdge",
    "Ledger",
    "NewRow",
    "OpenedRow",
    "OwnerKeyset",
    "RowRecipe",
    "RowWriter",
    "SealedLedger",
    "SealedRow",
    "SealingEpoch",
    "TrialKeyringWarning",
    "TurnSummaries",
    "check_length",
    "check_skew",
    "epoch_end",
    "resolve_backend",
    "stored_epoch",
    "tags_equal",
]
