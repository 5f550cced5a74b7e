"""Everything that touches key material: the AEAD, the row recipe, keysets, the keyring edge and the cache.

``vault/`` uses only what this module exports: the :class:`KeyManager`, the :class:`RowRecipe` that seals and
opens rows (it never builds a nonce or an AAD), and the :class:`IndexKey` of blind tags and row ids; raw key
bytes never leave this package.
"""

from keys.blind_index import IndexKey, tags_equal
from keys.commitments import KeyCommitments, KeyRecords
from keys.envelope import CHUNK_BYTES
from keys.epochrow import WRAPPED_V3_SIZE as EPOCH_WRAPPED_SIZE
from keys.epochrow import stored_epoch
from keys.epochs import epoch_end
from keys.keyring_edge import KeyringEdge, resolve_backend
from keys.keyset import MAX_VERSION as MAX_KEY_VERSION
from keys.keyset import OwnerKeyset
from keys.ledger import DeletionLedgers, Ledger, SealedLedger
from keys.manager import NO_OWNER_KEYS, KeyManager
from keys.rowseal import EPOCH_CLOSED, OpenedRow, PutEpoch, RowRecipe, RowWriter, SealedRow
from keys.turnsummaries import TurnSummaries

__all__ = [
    "CHUNK_BYTES",
    "EPOCH_CLOSED",
    "EPOCH_WRAPPED_SIZE",
    "MAX_KEY_VERSION",
    "NO_OWNER_KEYS",
    "DeletionLedgers",
    "IndexKey",
    "KeyCommitments",
    "KeyManager",
    "KeyRecords",
    "KeyringEdge",
    "Ledger",
    "OpenedRow",
    "OwnerKeyset",
    "PutEpoch",
    "RowRecipe",
    "RowWriter",
    "SealedLedger",
    "SealedRow",
    "TurnSummaries",
    "epoch_end",
    "resolve_backend",
    "stored_epoch",
    "tags_equal",
]
