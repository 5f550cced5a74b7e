"""Key commitments, version reservations, tombstones and the owner registry in the SQLite file
(``keys.KeyCommitments``; threat_model.md, "Keyring entries")."""

from __future__ import annotations

import json
import sqlite3
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from keys import MAX_KEY_VERSION
from vault.errors import IntegrityError, StorageError
from vault.storage.sqlite.epochs import SqliteEpochRecords
from vault.storage.sqlite.schema import OWNER_KEY_TABLES, blob, check_schema

if TYPE_CHECKING:
    from vault.storage.sqlite.store import SqliteStore

# every version an owner tag ever had: reserved, committed, or destroyed (versions are never reused)
_TOP_VERSION = ("SELECT max(v) FROM (SELECT max(version) AS v FROM key_reservations WHERE owner_tag = ?1 "
                "UNION ALL SELECT max(version) FROM owner_keys WHERE owner_tag = ?1 "
                "UNION ALL SELECT max(version) FROM key_tombstones WHERE owner_tag = ?1)")
_ABANDON = ("INSERT INTO key_tombstones (owner_tag, version, check_value, swept) "
            "SELECT owner_tag, version, x'', 0 FROM key_reservations r WHERE owner_tag = ? AND reserved_at < ? "
            "AND NOT EXISTS (SELECT 1 FROM owner_keys k WHERE k.owner_tag = r.owner_tag AND k.version = r.version) "
            "AND NOT EXISTS (SELECT 1 FROM key_tombstones t WHERE t.owner_tag = r.owner_tag AND t.version = r.version) "
            "ON CONFLICT (owner_tag, version) DO NOTHING")
_TOMBSTONE = ("INSERT INTO key_tombstones (owner_tag, version, check_value, swept) VALUES (?1, ?2, coalesce((SELECT "
              "check_value FROM owner_keys WHERE owner_tag = ?1 AND version = ?2), x''), 0) "
              "ON CONFLICT (owner_tag, version) DO UPDATE SET swept = 0")
# how many of the versions in the JSON array ?2 have a tombstone, and how many still a commitment
_DESTROYED = ("SELECT (SELECT count(*) FROM key_tombstones WHERE owner_tag = ?1 AND version IN (SELECT value FROM "
              "json_each(?2))), (SELECT count(*) FROM owner_keys WHERE owner_tag = ?1 AND version IN (SELECT value "
              "FROM json_each(?2)))")
_LIVE = ("SELECT version, check_value FROM owner_keys WHERE owner_tag = ?1 "
         "AND version NOT IN (SELECT version FROM key_tombstones WHERE owner_tag = ?1)")


class SqliteCommitments(SqliteEpochRecords):
    """Key commitments, the owner registry (keys.KeyCommitments) and the epochs' keys (keys.commitments.EpochRecords,
    the mixin); writes join the thread's open transaction."""

    def __init__(self, store: SqliteStore) -> None:
        self._store = store

    def locked(self) -> AbstractContextManager[object]:
        """A write transaction: the database write lock, held until the block ends."""
        return self._store.transaction()

    def owner_commitments(self, owner_tag: bytes) -> dict[int, bytes]:
        """Stored key commitments of an owner's live versions (never one a tombstone names), by version."""
        return {_version(version): blob(value) for version, value in self._store.query(_LIVE, (owner_tag,))}

    def reserve_owner_version(self, owner_tag: bytes, now: float, abandon_before: float) -> int:
        """Reserve the owner's next key version in a transaction of its own, committed before any key is written
        (never inside another: the reservation must outlive a write that fails). Reservations older than
        ``abandon_before`` that never got a commitment are tombstoned on the way: their writers gave up."""
        if self._store.in_transaction():
            raise StorageError("a key version cannot be reserved inside another write transaction")
        with self._store.transaction() as tx:
            tx.connection.execute(_ABANDON, (owner_tag, abandon_before))
            top = tx.connection.execute(_TOP_VERSION, (owner_tag,)).fetchone()[0]
            version = _version(top or 0) + 1
            tx.connection.execute("INSERT INTO key_reservations (owner_tag, version, reserved_at) VALUES (?, ?, ?)",
                                  (owner_tag, version, now))
        return version

    def version_pending(self, owner_tag: bytes, version: int) -> bool:
        """Whether ``version`` is reserved and neither committed nor tombstoned (its key may be written now)."""
        return bool(self._store.query(
            "SELECT 1 FROM key_reservations r WHERE owner_tag = ?1 AND version = ?2 "
            "AND NOT EXISTS (SELECT 1 FROM owner_keys WHERE owner_tag = ?1 AND version = ?2) "
            "AND NOT EXISTS (SELECT 1 FROM key_tombstones WHERE owner_tag = ?1 AND version = ?2)",
            (owner_tag, version)))

    def record_owner_commitment(self, owner_tag: bytes, version: int, value: bytes, sealed_name: bytes) -> None:
        """Record an owner key commitment (unless a tombstone names the version; the caller reads it back) and
        register the owner."""
        self._store.atomic([("INSERT INTO owner_keys (owner_tag, version, check_value) SELECT ?1, ?2, ?3 WHERE NOT "
                             "EXISTS (SELECT 1 FROM key_tombstones WHERE owner_tag = ?1 AND version = ?2) "
                             "ON CONFLICT (owner_tag, version) DO NOTHING", (owner_tag, version, value)),
                            ("INSERT INTO owners (owner_tag, sealed_name) VALUES (?, ?) "
                             "ON CONFLICT (owner_tag) DO NOTHING", (owner_tag, sealed_name))])

    def tombstone_owner_versions(self, owner_tag: bytes, versions: set[int] | None) -> set[int]:
        """Destroy ``versions`` in the database: a tombstone each (with its commitment, if it had one; unswept, even
        where a writer planted one marked swept), the commitment dropped, each read back before the transaction
        ends, inside a schema checked to be exactly the vault's. None: every version the owner ever had or reserved,
        and the owner's registration. Returns the versions destroyed."""

        def destroy(connection: sqlite3.Connection) -> set[int]:
            check_schema(connection, OWNER_KEY_TABLES)
            found = versions if versions is not None else {_version(version) for (version,) in connection.execute(
                "SELECT version FROM owner_keys WHERE owner_tag = ?1 UNION "
                "SELECT version FROM key_reservations WHERE owner_tag = ?1", (owner_tag,))}
            for version in sorted(found):
                connection.execute(_TOMBSTONE, (owner_tag, version))
                connection.execute("DELETE FROM owner_keys WHERE owner_tag = ? AND version = ?", (owner_tag, version))
            if versions is None:
                connection.execute("DELETE FROM owners WHERE owner_tag = ?", (owner_tag,))
            _read_back(connection, owner_tag, found)
            return set(found)

        return self._store.within(destroy)

    def tombstones(self, owner_tag: bytes | None, unswept_only: bool) -> list[tuple[bytes, int, bool]]:
        """(owner tag, version, swept) of destroyed versions, of one owner or all; ``unswept_only``: those
        whose keyring entry is not yet known to be gone."""
        sql = "SELECT owner_tag, version, swept FROM key_tombstones WHERE (?1 IS NULL OR owner_tag = ?1)"
        sql += " AND swept = 0" if unswept_only else ""
        found = self._store.query(sql + " ORDER BY owner_tag, version", (owner_tag,))
        return [(blob(tag), _version(version), swept == 1) for tag, version, swept in found]

    def mark_swept(self, owner_tag: bytes, versions: list[int]) -> None:
        """Record that the keyring entries of these destroyed versions were found gone (or deleted); part of a
        shred, so on a full file system it makes room like a delete (store.deleting)."""
        statements = [("UPDATE key_tombstones SET swept = 1 WHERE owner_tag = ? AND version = ?", (owner_tag, version))
                      for version in versions]
        if not statements or self._store.in_transaction():  # joined (a first key's sweep, under the write lock)
            self._store.atomic(statements)
        else:
            self._store.deleting(lambda tx: [tx.connection.execute(*statement) for statement in statements])

    def registered_owners(self) -> list[tuple[bytes, bytes]]:
        """(owner tag, sealed name) of every registered owner."""
        return [(blob(tag), blob(name)) for tag, name in self._store.query("SELECT owner_tag, sealed_name FROM owners")]

    def key_versions_in_use(self, owner_tag: bytes) -> dict[int, int]:
        """How many rows (expired or not) each key version of an owner still wraps."""
        return dict(self._store.query(
            "SELECT key_version, count(*) FROM rows WHERE owner_tag = ? GROUP BY key_version", (owner_tag,)))

    def index_commitment(self) -> bytes | None:
        """The stored commitment of the index key."""
        return self._store.get_meta("index_key_check")

    def record_index_commitment(self, value: bytes) -> None:
        """Record the index key commitment."""
        self._store.atomic([("INSERT OR IGNORE INTO meta (name, value) VALUES ('index_key_check', ?)", (value,))])


def _read_back(connection: sqlite3.Connection, owner_tag: bytes, versions: set[int]) -> None:
    """IntegrityError unless each of ``versions`` has its tombstone and no commitment (read in the transaction that
    wrote them, before it commits: a planted object that undid either would leave a key no sweep finds)."""
    tombstoned, committed = connection.execute(_DESTROYED, (owner_tag, json.dumps(sorted(versions)))).fetchone()
    if tombstoned != len(versions) or committed:
        raise IntegrityError("destroying key versions did not stick (the database was altered to undo it); nothing "
                             "was destroyed. Restore it from backup, or remove what was planted")


def _version(value: object) -> int:
    """A key version column as the vault writes it; anything else (only a writer of the file makes it) is tampering."""
    if type(value) is not int or not 0 <= value <= MAX_KEY_VERSION:
        raise IntegrityError("a stored key version has the wrong type or range")
    return value
