"""Owner key versions in the database, written once for both stores (``keys.KeyCommitments``; threat_model.md,
"Keyring entries" and "What the database cannot move"): commitments (``owner_keys``), reservations made before an
entry is written, tombstones of destroyed versions, and the owner registry.

Invariants kept here, on every store: a version is numbered past every one the database lists; a reservation older
than the allowance (by the clock of Dialect.now) that never got a commitment is tombstoned; a commitment is
recorded only for a version no tombstone names; destroying versions writes a tombstone each (unswept, even over one
a writer planted as swept) and drops the commitment, reads both back before the transaction ends, and marks the
tables it changed as ones whose catalog must be exactly the vault's before it commits. Every conflict names its
target, so an index a writer adds makes a write fail, never a silent no-op.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

from vault.errors import StorageError
from vault.storage.sql.session import KeyStore, Session
from vault.storage.sql.values import blob, is_swept, key_version

OWNER_KEY_TABLES = frozenset({"owner_keys", "owners", "key_reservations", "key_tombstones"})
# what a statement of this module means by an owner's live versions: committed, and no tombstone names them
_LIVE = ("SELECT version, check_value FROM owner_keys WHERE owner_tag = %(tag)s "
         "AND version NOT IN (SELECT version FROM key_tombstones WHERE owner_tag = %(tag)s)")
# every version an owner tag ever had: reserved, committed, or destroyed (versions are never reused)
_TOP = ("SELECT max(v) FROM (SELECT max(version) AS v FROM key_reservations WHERE owner_tag = %(tag)s "
        "UNION ALL SELECT max(version) FROM owner_keys WHERE owner_tag = %(tag)s "
        "UNION ALL SELECT max(version) FROM key_tombstones WHERE owner_tag = %(tag)s) AS versions")
_ABANDON = ("INSERT INTO key_tombstones (owner_tag, version, check_value, swept) "
            "SELECT owner_tag, version, {empty}, {false} FROM key_reservations r WHERE owner_tag = %(tag)s "
            "AND reserved_at < {now} - %(allowance)s "
            "AND NOT EXISTS (SELECT 1 FROM owner_keys k WHERE k.owner_tag = r.owner_tag AND k.version = r.version) "
            "AND NOT EXISTS (SELECT 1 FROM key_tombstones t WHERE t.owner_tag = r.owner_tag AND t.version = r.version) "
            "ON CONFLICT (owner_tag, version) DO NOTHING")
_TOPS = ("SELECT owner_tag, max(version) FROM (SELECT owner_tag, version FROM owner_keys UNION ALL SELECT owner_tag, "
         "version FROM key_reservations UNION ALL SELECT owner_tag, version FROM key_tombstones) AS versions "
         "GROUP BY owner_tag ORDER BY owner_tag")
_RESERVE = "INSERT INTO key_reservations (owner_tag, version, reserved_at) VALUES (%(tag)s, %(v)s, {now})"
_PENDING = ("SELECT 1 FROM key_reservations WHERE owner_tag = %(tag)s AND version = %(v)s "
            "AND NOT EXISTS (SELECT 1 FROM owner_keys WHERE owner_tag = %(tag)s AND version = %(v)s) "
            "AND NOT EXISTS (SELECT 1 FROM key_tombstones WHERE owner_tag = %(tag)s AND version = %(v)s)")
_RECORD = ("INSERT INTO owner_keys (owner_tag, version, check_value) SELECT %(tag)s, %(v)s, %(value)s WHERE NOT "
           "EXISTS (SELECT 1 FROM key_tombstones WHERE owner_tag = %(tag)s AND version = %(v)s) "
           "ON CONFLICT (owner_tag, version) DO NOTHING")
_REGISTER = "INSERT INTO owners (owner_tag, sealed_name) VALUES (%(tag)s, %(name)s) ON CONFLICT (owner_tag) DO NOTHING"
_EVERY_VERSION = ("SELECT version FROM owner_keys WHERE owner_tag = %(tag)s UNION "
                  "SELECT version FROM key_reservations WHERE owner_tag = %(tag)s")
# INSERT ... SELECT, not VALUES with a subquery: Citus refuses a subquery inside VALUES (the WHERE is what SQLite
# needs before ON CONFLICT after a SELECT)
_TOMBSTONE = ("INSERT INTO key_tombstones (owner_tag, version, check_value, swept) SELECT %(tag)s, %(v)s, coalesce("
              "(SELECT check_value FROM owner_keys WHERE owner_tag = %(tag)s AND version = %(v)s), {empty}), {false} "
              "WHERE 1 = 1 ON CONFLICT (owner_tag, version) DO UPDATE SET swept = {false}")
_DROP = "DELETE FROM owner_keys WHERE owner_tag = %(tag)s AND version = %(v)s"
_UNREGISTER = "DELETE FROM owners WHERE owner_tag = %(tag)s"
# read back in the transaction that destroyed it: (its tombstones, its commitments); (1, 0) once destroyed
_DESTROYED = ("SELECT (SELECT count(*) FROM key_tombstones WHERE owner_tag = %(tag)s AND version = %(v)s), "
              "(SELECT count(*) FROM owner_keys WHERE owner_tag = %(tag)s AND version = %(v)s)")
_TOMBSTONES = {  # by (of one owner, unswept only)
    (False, False): "SELECT owner_tag, version, swept FROM key_tombstones ORDER BY owner_tag, version",
    (False, True): "SELECT owner_tag, version, swept FROM key_tombstones WHERE swept IS NOT {true} "
                   "ORDER BY owner_tag, version",
    (True, False): "SELECT owner_tag, version, swept FROM key_tombstones WHERE owner_tag = %(tag)s ORDER BY version",
    (True, True): "SELECT owner_tag, version, swept FROM key_tombstones WHERE owner_tag = %(tag)s "
                  "AND swept IS NOT {true} ORDER BY version",
}
_MARK_SWEPT = "UPDATE key_tombstones SET swept = {true} WHERE owner_tag = %(tag)s AND version = %(v)s"
_RECORD_INDEX = ("INSERT INTO meta (name, value) VALUES ('index_key_check', %(value)s) "
                 "ON CONFLICT (name) DO NOTHING")
_NOT_STUCK = ("destroying key versions did not stick (the database was altered to undo it); nothing was destroyed. "
              "Restore it from backup, or remove what was planted")


class OwnerRecords:
    """``keys.KeyCommitments`` over a store's KeyStore: the statements of this module, rendered once."""

    def __init__(self, store: KeyStore) -> None:
        self._keys = store
        self._sql = store.dialect.render

    def locked(self) -> AbstractContextManager[object]:
        """A write transaction holding the lock key creation holds (SQLite: its one writer lock)."""
        return self._keys.locked()

    def owner_commitments(self, owner_tag: bytes) -> dict[int, bytes]:
        """Stored key commitments of an owner's live versions (never one a tombstone names), by version."""
        return {key_version(version): blob(value)
                for version, value in self._keys.read(self._sql(_LIVE), {"tag": owner_tag})}

    def reserve_owner_version(self, owner_tag: bytes, now: float, abandon_before: float) -> int:
        """Reserve the owner's next key version in a transaction of its own, committed before any key is written
        (never inside another: the reservation must outlive a write that fails), under the locks writing a version
        takes. Reservations older than the allowance ``now - abandon_before`` that never got a commitment are
        tombstoned on the way: their writers gave up."""
        if abandon_before != abandon_before or now != now:
            raise StorageError("a reservation needs a clock reading")

        def reserve(session: Session) -> int:
            params = {"tag": owner_tag, "now": now, "allowance": max(0.0, now - abandon_before)}
            session.run(self._sql(_ABANDON), params)
            top = session.one(self._sql(_TOP), params)
            version = key_version((top or (None,))[0] or 0) + 1
            session.run(self._sql(_RESERVE), params | {"v": version})
            return version

        return self._keys.reserve(reserve, owner_tag)

    def version_tops(self) -> list[tuple[bytes, int]]:
        """(owner tag, the highest version reserved, committed or tombstoned) of every owner the database lists."""
        return [(blob(tag), key_version(top)) for tag, top in self._keys.read(self._sql(_TOPS), {})]

    def version_pending(self, owner_tag: bytes, version: int) -> bool:
        """Whether ``version`` is reserved and neither committed nor tombstoned (its key may be written now)."""
        return bool(self._keys.read(self._sql(_PENDING), {"tag": owner_tag, "v": version}))

    def record_owner_commitment(self, owner_tag: bytes, version: int, value: bytes, sealed_name: bytes) -> None:
        """Record an owner key commitment (unless a tombstone names the version; the caller reads it back) and
        register the owner."""

        def record(session: Session) -> None:
            session.run(self._sql(_RECORD), {"tag": owner_tag, "v": version, "value": value})
            session.run(self._sql(_REGISTER), {"tag": owner_tag, "name": sealed_name})

        self._keys.write(record, owner_tag)

    def tombstone_owner_versions(self, owner_tag: bytes, versions: set[int] | None) -> set[int]:
        """Destroy ``versions``: a tombstone each (with its commitment, if it had one), the commitment dropped, each
        read back before the transaction ends; None: every version the owner ever had or reserved, and the owner's
        registration. Returns the versions destroyed."""

        def destroy(session: Session) -> set[int]:
            session.check_tables_before_commit(OWNER_KEY_TABLES)
            found = versions if versions is not None else {
                key_version(version) for (version,) in session.all(self._sql(_EVERY_VERSION), {"tag": owner_tag})}
            for version in sorted(found):
                params = {"tag": owner_tag, "v": version}
                session.run(self._sql(_TOMBSTONE), params)
                session.run(self._sql(_DROP), params)
                if session.one(self._sql(_DESTROYED), params) != (1, 0):
                    session.refuse(_NOT_STUCK)
            if versions is None:
                session.run(self._sql(_UNREGISTER), {"tag": owner_tag})
            return set(found)

        return self._keys.write(destroy, owner_tag)

    def tombstones(self, owner_tag: bytes | None, unswept_only: bool) -> list[tuple[bytes, int, bool]]:
        """(owner tag, version, swept) of destroyed versions, of one owner or all; ``unswept_only``: those whose
        keyring entry is not yet known to be gone."""
        statement = self._sql(_TOMBSTONES[owner_tag is not None, unswept_only])
        found = self._keys.read(statement, {"tag": owner_tag})
        return [(blob(tag), key_version(version), is_swept(swept)) for tag, version, swept in found]

    def mark_swept(self, owner_tag: bytes, versions: list[int]) -> None:
        """Record that the keyring entries of these destroyed versions were found gone (or deleted); part of a
        shred, so on a full file system it makes room like a delete."""
        if not versions:
            return

        def mark(session: Session) -> None:
            for version in versions:
                session.run(self._sql(_MARK_SWEPT), {"tag": owner_tag, "v": version})

        self._keys.remove(mark)

    def registered_owners(self) -> list[tuple[bytes, bytes]]:
        """(owner tag, sealed name) of every registered owner."""
        return [(blob(tag), blob(name)) for tag, name in self._keys.read("SELECT owner_tag, sealed_name FROM owners",
                                                                          {})]

    def key_versions_in_use(self, owner_tag: bytes) -> dict[int, int]:
        """How many rows (expired or not) each key version of an owner still wraps."""
        return self._keys.count_versions_in_use(owner_tag)

    def index_commitment(self) -> bytes | None:
        """The stored commitment of the index key."""
        return self._keys.meta("index_key_check")

    def record_index_commitment(self, value: bytes) -> None:
        """Record the index key's commitment (the first recorded stays)."""
        self._keys.write(lambda session: session.run(self._sql(_RECORD_INDEX), {"value": value}))
