"""The key bookkeeping both stores share, written once: owner key versions (owner_records.py) and expiry epochs'
keys (epoch_records.py), over a store's KeyStore (session.py) in its Dialect (dialect.py). Each store keeps only
what really differs: its connections, locks and transactions, its schema and migrations, and (SQLite) the room a
destruction needs on a full file system."""

from __future__ import annotations

from vault.storage.sql.epoch_records import EpochRecords
from vault.storage.sql.owner_records import OwnerRecords


class KeyRecords(OwnerRecords, EpochRecords):
    """A store's ``commitments``: ``keys.KeyCommitments`` and ``keys.commitments.EpochRecords`` over one KeyStore
    (both bases keep the same two attributes)."""

    __slots__ = ()
