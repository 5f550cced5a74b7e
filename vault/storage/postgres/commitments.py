"""Key commitments, version reservations, tombstones and the owner registry on PostgreSQL (``keys.KeyCommitments``;
threat_model.md, "Keyring entries"). ``locked`` is the key lock, held by key creation and rotation while they
write the keyring (rare); every change to an owner's versions (a commitment, a tombstone, a retirement's count)
takes the key lock and then the owner's lock, in that order: so a shred or retirement waits for a rotation in
flight, as on SQLite, and never deadlocks with it. A reservation takes only the owner's lock (its own
transaction, before any key is written)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING

from vault.errors import IntegrityError, StorageError
from vault.storage.postgres.epochs import PgEpochRecords
from vault.storage.postgres.writes import PgWriteTx
from vault.storage.sqlite.commitments import _version
from vault.storage.sqlite.schema import blob

if TYPE_CHECKING:
    from vault.storage.postgres.store import PostgresStore

_TOP_VERSION = ("SELECT max(v) FROM (SELECT max(version) AS v FROM key_reservations WHERE owner_tag = %(tag)s "
                "UNION ALL SELECT max(version) FROM owner_keys WHERE owner_tag = %(tag)s "
                "UNION ALL SELECT max(version) FROM key_tombstones WHERE owner_tag = %(tag)s) AS versions")
# a reservation's age is the database server's clock (extract(epoch FROM clock_timestamp()), in seconds) against its
# stamp from that same clock: hosts whose clocks disagree still agree on it
_ABANDON = ("INSERT INTO key_tombstones (owner_tag, version, check_value, swept) "
            "SELECT owner_tag, version, '\\x'::bytea, false FROM key_reservations r WHERE owner_tag = %(tag)s "
            "AND reserved_at < extract(epoch FROM clock_timestamp()) - %(allowance)s "
            "AND NOT EXISTS (SELECT 1 FROM owner_keys k WHERE k.owner_tag = r.owner_tag AND k.version = r.version) "
            "AND NOT EXISTS (SELECT 1 FROM key_tombstones t WHERE t.owner_tag = r.owner_tag AND t.version = r.version) "
            "ON CONFLICT (owner_tag, version) DO NOTHING")
# a commitment is recorded only for a version no tombstone names (the caller reads it back)
_RECORD = ("INSERT INTO owner_keys (owner_tag, version, check_value) SELECT %(tag)s, %(v)s, %(value)s WHERE NOT "
           "EXISTS (SELECT 1 FROM key_tombstones WHERE owner_tag = %(tag)s AND version = %(v)s) "
           "ON CONFLICT (owner_tag, version) DO NOTHING")
_LIVE = ("SELECT version, check_value FROM owner_keys WHERE owner_tag = %(tag)s "
         "AND version NOT IN (SELECT version FROM key_tombstones WHERE owner_tag = %(tag)s)")
_PENDING = ("SELECT 1 FROM key_reservations r WHERE owner_tag = %(tag)s AND version = %(v)s "
            "AND NOT EXISTS (SELECT 1 FROM owner_keys WHERE owner_tag = %(tag)s AND version = %(v)s) "
            "AND NOT EXISTS (SELECT 1 FROM key_tombstones WHERE owner_tag = %(tag)s AND version = %(v)s)")
_TOMBSTONE = ("INSERT INTO key_tombstones (owner_tag, version, check_value, swept) VALUES (%(tag)s, %(v)s, "
              "coalesce((SELECT check_value FROM owner_keys WHERE owner_tag = %(tag)s AND version = %(v)s), "
              "'\\x'::bytea), false) ON CONFLICT (owner_tag, version) DO UPDATE SET swept = false")
# how many of the versions %(vs)s have a tombstone, and how many still a commitment
_DESTROYED = ("SELECT (SELECT count(*) FROM key_tombstones WHERE owner_tag = %(tag)s AND version = ANY(%(vs)s)), "
              "(SELECT count(*) FROM owner_keys WHERE owner_tag = %(tag)s AND version = ANY(%(vs)s))")


class PostgresCommitments(PgEpochRecords):
    """Key commitments, the owner registry and (the mixin) the epochs' keys; writes join the thread's open
    transaction, else run in their own. ``locked`` (the key lock) comes from the mixin."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    @contextmanager
    def _writing(self, owner_tag: bytes | None = None) -> Iterator[PgWriteTx]:
        """The thread's open write transaction, else a new one; with ``owner_tag``, the key lock and then the
        owner's lock taken in it (in that order, as key creation takes them: writes.PgWriteTx.lock_keys)."""
        joined = self._store.open_transaction()
        with nullcontext(joined) if isinstance(joined, PgWriteTx) else self._store.transaction() as tx:
            if owner_tag is not None:
                tx.lock_keys(owner_tag)
            yield tx

    def owner_commitments(self, owner_tag: bytes) -> dict[int, bytes]:
        """Stored key commitments of an owner's live versions, by version."""
        return {_version(version): blob(value) for version, value in self._store.query(_LIVE, {"tag": owner_tag})}

    def reserve_owner_version(self, owner_tag: bytes, now: float, abandon_before: float) -> int:
        """Reserve the owner's next key version in a committed transaction of its own, under the key lock and the
        owner's (as writing a version is, so no reservation is abandoned while its key is being written); older
        reservations that never got a commitment are tombstoned on the way. Their age is judged by the server's
        clock (``now - abandon_before`` is the allowance), and each reservation is stamped with it: a host whose
        clock runs ahead abandons nothing another host is still writing."""
        if self._store.open_transaction() is not None:
            raise StorageError("a key version cannot be reserved inside another write transaction")
        with self._store.transaction() as tx:
            tx.lock_keys(owner_tag)
            tx._run(_ABANDON, {"tag": owner_tag, "allowance": max(0.0, now - abandon_before)})
            top = tx._one(_TOP_VERSION, {"tag": owner_tag})[0]
            version = _version(top or 0) + 1
            tx._run("INSERT INTO key_reservations (owner_tag, version, reserved_at) VALUES "
                    "(%s, %s, extract(epoch FROM clock_timestamp()))", (owner_tag, version))
        return version

    def version_pending(self, owner_tag: bytes, version: int) -> bool:
        """Whether ``version`` is reserved and neither committed nor tombstoned."""
        return bool(self._store.query(_PENDING, {"tag": owner_tag, "v": version}))

    def record_owner_commitment(self, owner_tag: bytes, version: int, value: bytes, sealed_name: bytes) -> None:
        """Record an owner key commitment (unless a tombstone names the version) and register the owner."""
        with self._writing(owner_tag) as tx:
            tx._run(_RECORD, {"tag": owner_tag, "v": version, "value": value})
            tx._run("INSERT INTO owners (owner_tag, sealed_name) VALUES (%s, %s) ON CONFLICT (owner_tag) DO NOTHING",
                    (owner_tag, sealed_name))

    def tombstone_owner_versions(self, owner_tag: bytes, versions: set[int] | None) -> set[int]:
        """Destroy ``versions`` in the database (a tombstone each, unswept, the commitment dropped, each read back
        before COMMIT, and the tables' catalog checked then); None: every version the owner ever had or reserved,
        and the owner's registration. Returns the versions destroyed. Deleting a key's row waits for every put
        holding it FOR SHARE. A shred (None) also takes the key lock first, which key creation and rotation hold
        from their reservation check to their commitment: a version made on another host meanwhile is either
        committed before the shred reads the versions (and destroyed with them), or refused after it; without
        the lock its commitment could land after the shred, its keyring entry written after the sweep."""
        with self._writing(owner_tag) as tx:
            found = versions
            if found is None:
                found = {_version(version) for (version,) in tx._all(
                    "SELECT version FROM owner_keys WHERE owner_tag = %(tag)s UNION "
                    "SELECT version FROM key_reservations WHERE owner_tag = %(tag)s", {"tag": owner_tag})}
            for version in sorted(found):
                tx._run(_TOMBSTONE, {"tag": owner_tag, "v": version})
            tx._run("DELETE FROM owner_keys WHERE owner_tag = %s AND version = ANY(%s)", (owner_tag, sorted(found)))
            if versions is None:
                tx._run("DELETE FROM owners WHERE owner_tag = %s", (owner_tag,))
            tombstoned, committed = tx._one(_DESTROYED, {"tag": owner_tag, "vs": sorted(found)})
            if tombstoned != len(found) or committed:
                tx.distrust()
                raise IntegrityError("destroying key versions did not stick (the database was altered to undo it); "
                                     "nothing was destroyed. Restore it from backup, or remove what was planted")
            # the sweep deletes the keyring entries of the versions returned and of the tombstones it then finds
            tx.must_stick |= {"key_tombstones", "owner_keys", "owners", "key_reservations"}
        return set(found)

    def tombstones(self, owner_tag: bytes | None, unswept_only: bool) -> list[tuple[bytes, int, bool]]:
        """(owner tag, version, swept) of destroyed versions, of one owner or all."""
        statement = ("SELECT owner_tag, version, swept FROM key_tombstones WHERE (%(tag)s::bytea IS NULL OR "
                     "owner_tag = %(tag)s)")
        statement += " AND NOT swept" if unswept_only else ""
        found = self._store.query(statement + " ORDER BY owner_tag, version", {"tag": owner_tag})
        return [(blob(tag), _version(version), swept is True) for tag, version, swept in found]

    def mark_swept(self, owner_tag: bytes, versions: list[int]) -> None:
        """Record that the keyring entries of these destroyed versions are gone."""
        if not versions:
            return
        with self._writing() as tx:
            tx._run("UPDATE key_tombstones SET swept = true WHERE owner_tag = %s AND version = ANY(%s)",
                    (owner_tag, versions))

    def registered_owners(self) -> list[tuple[bytes, bytes]]:
        """(owner tag, sealed name) of every registered owner."""
        return [(blob(tag), blob(name)) for tag, name in self._store.query("SELECT owner_tag, sealed_name FROM owners")]

    def key_versions_in_use(self, owner_tag: bytes) -> dict[int, int]:
        """How many rows each key version of an owner still wraps; inside a write transaction, under the owner's
        lock (a retirement counts after every put of the owner in flight has committed)."""
        joined = self._store.open_transaction()
        if isinstance(joined, PgWriteTx):
            joined.lock_keys(owner_tag)
        found = self._store.query("SELECT key_version, count(*) FROM rows WHERE owner_tag = %s GROUP BY key_version",
                                  (owner_tag,))
        return {_version(version): count for version, count in found}

    def index_commitment(self) -> bytes | None:
        """The stored commitment of the index key."""
        return self._store.get_meta("index_key_check")

    def record_index_commitment(self, value: bytes) -> None:
        """Record the index key commitment."""
        with self._writing() as tx:
            tx._run("INSERT INTO meta (name, value) VALUES ('index_key_check', %s) ON CONFLICT DO NOTHING", (value,))
