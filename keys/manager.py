"""KeyManager: the one façade ``vault/`` uses for key material (index key, owner keysets, data keys).

Keyring layout: service ``scratchvault/<vault_id hex>/index`` user ``index`` holds the index key (written once,
in the transaction that draws the vault id); each owner key version has a write-once entry of its own
(keys/keyring/owner_entries.py). ``vault_id`` keeps two vaults on one keyring apart. Lookups are cached (bounded size
and lifetime) and the cache is cleared on close. A key is used only if the database recorded its commitment
when it was made, and every key loaded is checked against it: a keyring that returns a different or truncated
key is KeyUnavailable, not "tampering", and a version the database never recorded is never adopted.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Set
from typing import NoReturn

from keys.blind_index import IndexKey, tags_equal
from keys.commitments import KeyRecords
from keys.crypto.aead import KEY_SIZE, random_bytes
from keys.epochs.keys import EpochKeys
from keys.epochs.schedule import DEFAULT_EPOCH_SECONDS, DEFAULT_SKEW_SECONDS
from keys.errors import InvalidArgument, KeyUnavailable, VaultError
from keys.keyring.cache import CacheLimits, KeyCache
from keys.keyring.edge import KeyringEdge
from keys.keyring.entries import MAX_VERSION, parse_single_key
from keys.keyring.owner_entries import OwnerEntries
from keys.owner_keyset import OwnerKeyset

_INDEX = ("index",)
NO_OWNER_KEYS = "the OS keyring holds no keys for this owner"
_REPLACED = ("the OS keyring returned a different {what} than the one this vault recorded (the entry was "
             "replaced, truncated, or this is another keyring); restore it from the keyring backup")


class KeyManager:
    """Fetches, creates, checks and caches this vault's keys in the OS keyring."""

    def __init__(self, keyring: KeyringEdge, vault_id: bytes, commitments: KeyRecords, *, cache: CacheLimits,
                 epoch_seconds: int = DEFAULT_EPOCH_SECONDS, epoch_skew_seconds: int = DEFAULT_SKEW_SECONDS) -> None:
        self._keyring = keyring
        self._vault_id = vault_id
        self._commitments = commitments
        self._cache: KeyCache[object] = KeyCache(cache.max_entries, cache.ttl_seconds)
        prefix = "scratchvault/" + vault_id.hex()
        self._index_service = prefix + "/index"
        self._entries = OwnerEntries(keyring, vault_id, commitments)
        # a reservation older than this never got its key: its writer gave up (keyring timeout) or died
        self._abandon_after = 2 * keyring.timeout + 60.0
        self.epochs = EpochKeys(keyring, vault_id, commitments, cache=cache, length=epoch_seconds,
                                skew=epoch_skew_seconds)

    @property
    def backend_name(self) -> str:
        """Which keyring backend is in use."""
        return self._keyring.backend_name

    @property
    def vault_id(self) -> bytes:
        """The vault this manager's keys belong to."""
        return self._vault_id

    def index_key(self) -> IndexKey:
        """The vault's index key; its absence is an error (it is made once, with the database)."""
        cached = self._cache.get(_INDEX)
        if isinstance(cached, IndexKey):
            return cached
        stored = self._keyring.get(self._index_service, "index")
        if stored is None:
            raise KeyUnavailable(
                "this vault's index key is missing from the OS keyring (wrong keyring, or it was deleted); "
                "restore the keyring from backup. Without it no row can be found; a new key is never made "
                "over an existing vault"
            )
        key = IndexKey(parse_single_key(stored, "vault index key"))
        recorded, commitment = self._commitments.index_commitment(), key.commitment(self._vault_id)
        if recorded is None:
            self._commitments.record_index_commitment(commitment)
        elif not tags_equal(recorded, commitment):
            raise KeyUnavailable(_REPLACED.format(what="index key"))
        self._cache.put(_INDEX, key)
        return key

    def cached_index_key(self) -> IndexKey | None:
        """The index key if it is in the cache, without asking the keyring (for work that must never wait on
        a failing keyring, such as an audit record of a KeyUnavailable)."""
        cached = self._cache.get(_INDEX)
        return cached if isinstance(cached, IndexKey) else None

    def create_index_key(self) -> IndexKey:
        """Make, store and record the index key of a new vault (inside the transaction that creates it)."""
        key = IndexKey(random_bytes(KEY_SIZE))
        self._keyring.set(self._index_service, "index", key.serialize())
        self._commitments.record_index_commitment(key.commitment(self._vault_id))
        self._cache.put(_INDEX, key)
        return key

    def owner_keyset(self, user_id: str, *, refresh: bool = False) -> OwnerKeyset | None:
        """The owner's keyset (every recorded version whose entry exists), or None when the database records
        none; ``refresh`` bypasses the cache."""
        if not refresh:
            cached = self._cache.get(("owner", user_id))
            if isinstance(cached, OwnerKeyset):
                return cached
        keyset = self._load(self.index_key().owner_tag(user_id))
        if keyset is None:
            self._cache.invalidate(("owner", user_id))
        else:
            self._cache.put(("owner", user_id), keyset)
        return keyset

    def keyset_for_read(self, user_id: str, version: int) -> OwnerKeyset:
        """The keyset of an owner whose rows exist (reloaded once if ``version`` is unknown: rotated elsewhere?);
        its absence is KeyUnavailable, never a reason to make a new key."""
        keyset = self.owner_keyset(user_id)
        if keyset is not None and version not in keyset.versions:
            keyset = self.owner_keyset(user_id, refresh=True)
        if keyset is None:
            raise KeyUnavailable(
                f"{NO_OWNER_KEYS} although the vault holds rows for them (wrong keyring, or the entry was "
                "deleted); restore the keyring from backup. A new key is never generated over existing rows")
        return keyset

    def create_owner_keyset(self, user_id: str, has_rows: Callable[[bytes], bool]) -> OwnerKeyset:
        """The owner's keyset, or a first one for an owner with none (never over rows: they would be orphaned).
        Called outside any write transaction: the new version is reserved in one of its own first."""
        return self._new_version(user_id, has_rows)

    def rotate_owner_keyset(self, user_id: str) -> OwnerKeyset:
        """Add a version and make it primary (outside any write transaction, like ``create_owner_keyset``)."""
        return self._new_version(user_id, None)

    def retire_owner_versions(self, user_id: str, versions: set[int]) -> set[int]:
        """Tombstone ``versions`` (inside the caller's write transaction, which checked that no row needs them);
        ``sweep`` then deletes their entries, given the versions returned (kept in memory: a tombstone a writer of
        the database removes meanwhile must not keep a key). Refused while the old entry of schema 3 holds one of
        them together with a version that stays: that entry is never rewritten, only deleted whole."""
        owner_tag = self.index_key().owner_tag(user_id)
        kept_there = self._entries.schema3_live_versions(owner_tag) or set()
        if kept_there & versions and kept_there - versions:
            raise InvalidArgument(
                "this owner's older key versions share one keyring entry from before schema 4 with a version that "
                "stays, and that entry is never rewritten: run rotate_owner_key and rewrap, then retire (the old "
                "entry is then deleted whole)")
        if versions:  # the keyring says so first: a sweep deletes them whatever the database later says
            self._entries.retire_below(owner_tag, max(versions) + 1)
        destroyed = self._commitments.tombstone_owner_versions(owner_tag, versions)
        self._cache.invalidate(("owner", user_id))
        return destroyed

    def destroy_owner(self, user_id: str) -> tuple[bytes, set[int]]:
        """Crypto-shred, its first half: tombstone every version the owner ever had (inside the caller's write
        transaction); ``sweep`` then deletes the entries, after which every copy of their rows is unreadable.
        Returns the owner tag and the versions destroyed: those the database listed and those of the keyset this
        process holds (a writer of the database may have hidden some of them)."""
        owner_tag = self.index_key().owner_tag(user_id)
        cached = self._cache.get(("owner", user_id))
        held = set(cached.versions) if isinstance(cached, OwnerKeyset) else set()
        self._cache.invalidate(("owner", user_id))
        return owner_tag, held | self._commitments.tombstone_owner_versions(owner_tag, None)

    def sweep(self, owner_tag: bytes | None, *, everything: bool = False, destroyed: Set[int] = frozenset()) -> int:
        """Delete the keyring entries of destroyed versions (see keys/keyring/owner_entries.py)."""
        return self._entries.sweep(owner_tag, everything=everything, destroyed=destroyed)

    def sweep_unlisted(self, owner_tag: bytes, destroyed: set[int]) -> int:
        """After a shred, the owner's entries the database does not list (OwnerEntries.destroy_unlisted)."""
        self.adopt_owner_marks()
        return self._entries.destroy_unlisted(owner_tag, destroyed)

    def adopt_owner_marks(self) -> None:
        """Once per vault: write each owner's issued mark from the highest version the database lists, for owners
        whose versions passed the always-probed range before the keyring kept marks (keys/keyring/owner_marks.py); a
        writer of the database who acted before this ran is out of reach (threat_model.md)."""
        marks = self._entries.marks
        if not marks.adopted():
            marks.adopt(self._commitments.version_tops())

    def epoch_commitment(self, epoch: tuple[int, int]) -> bytes | None:
        """The commitment the database records for an epoch's live key (inside the caller's write transaction on
        SQLite), or None once it is closed: read uncached, so a key another process destroyed is seen."""
        found = self._commitments.epoch_commitment(*epoch)
        return None if found is None else found[1]

    def stats(self) -> dict[str, object]:
        """The backend in use and how many entries of destroyed key versions were found again and deleted."""
        return {"keyring_backend": self.backend_name,
                "keyring_entries_destroyed_on_sight": self._entries.destroyed_on_sight}

    def is_current(self, keyset: OwnerKeyset, recorded: bytes | None) -> bool:
        """Whether ``recorded``, the commitment the database holds for this keyset's primary version (None if it
        holds none), is exactly this key's: false after a retirement, a shred, or a shred and re-creation
        in another process. A put reads it in the statement that gives it its seq.
        """
        return recorded is not None and tags_equal(recorded, self._owner_commitment(keyset, keyset.primary))

    def registered_owner_names(self) -> list[str]:
        """The user ids of every registered owner (opened from the registry with the index key)."""
        index = self.index_key()
        return [index.open_name(self._vault_id, tag, sealed) for tag, sealed in self._commitments.registered_owners()]

    def _new_version(self, user_id: str, has_rows: Callable[[bytes], bool] | None) -> OwnerKeyset:
        """Reserve the next version (committed), then under the write lock write its entry once and record its
        commitment. A write that fails or times out leaves its reservation tombstoned (best effort; else the
        next reservation abandons it), so a late landing never makes a usable key."""
        owner_tag = self.index_key().owner_tag(user_id)
        self.adopt_owner_marks()
        now = time.time()
        version = self._commitments.reserve_owner_version(owner_tag, now, now - self._abandon_after)
        if version > MAX_VERSION:
            raise KeyUnavailable("this owner's keyset has run out of key versions")
        try:
            with self._commitments.locked():
                return self._write_version(user_id, owner_tag, version, has_rows)
        except KeyUnavailable:
            with contextlib.suppress(VaultError):
                self._commitments.tombstone_owner_versions(owner_tag, {version})
            raise

    def _write_version(self, user_id: str, owner_tag: bytes, version: int,
                       has_rows: Callable[[bytes], bool] | None) -> OwnerKeyset:
        """Under the write lock: check the reservation still stands, then write and record the version."""
        if not self._commitments.version_pending(owner_tag, version):
            raise KeyUnavailable("this owner's keys were destroyed or changed while a key version was being made; "
                                 "retry")
        current = self.owner_keyset(user_id, refresh=True)
        if has_rows is not None:  # a first keyset
            if current is not None:  # made by another writer meanwhile: ours is never written
                self._commitments.tombstone_owner_versions(owner_tag, {version})
                return current
            if has_rows(owner_tag) or self._commitments.owner_commitments(owner_tag):
                raise KeyUnavailable(f"{NO_OWNER_KEYS} although this vault already knows them; restore the keyring "
                                     "from backup (a new key would orphan that owner's rows)")
            self._entries.sweep(owner_tag, everything=True)  # a re-created owner: no destroyed key comes back
        elif current is None:
            raise KeyUnavailable(f"{NO_OWNER_KEYS}; nothing to rotate (restore the keyring from backup if the vault "
                                 "holds rows for them)")
        keyset = OwnerKeyset.generate(version) if current is None else current.with_new_version(version)
        self._entries.write_new(owner_tag, version, keyset)
        commitment = self._owner_commitment(keyset, version)
        self._commitments.record_owner_commitment(owner_tag, version, commitment,
                                                  self.index_key().seal_name(self._vault_id, owner_tag, user_id))
        recorded = self._commitments.owner_commitments(owner_tag).get(version)
        if recorded is None or not tags_equal(recorded, commitment):  # tombstoned meanwhile, or a conflicting row
            raise KeyUnavailable("the database did not record this owner's new key version (it was destroyed "
                                 "meanwhile, or a row a writer of the database left conflicts); retry")
        self._cache.put(("owner", user_id), keyset)
        return keyset

    def _load(self, owner_tag: bytes) -> OwnerKeyset | None:
        """The recorded versions whose entries exist, each checked against its commitment; a version made before
        schema 4 is read, never copied, from the owner's old entry. A missing version that rows need is
        KeyUnavailable. No raw key is a local here: a KeyUnavailable leaving this frame carries none."""
        parts: list[OwnerKeyset] = []
        schema3_entry: list[OwnerKeyset | None] = []
        for version, check in sorted(self._commitments.owner_commitments(owner_tag).items()):
            part = self._entries.read(owner_tag, version) or self._from_schema3_entry(owner_tag, version,
                                                                                            schema3_entry)
            if part is None:
                if version in self._commitments.key_versions_in_use(owner_tag):
                    raise KeyUnavailable(_REPLACED.format(what="keyset for this owner (a recorded key version "
                                                               "is missing)"))
                continue  # a version no row uses: not offered for new rows
            if not tags_equal(check, self._owner_commitment(part, version)):
                raise KeyUnavailable(_REPLACED.format(what="key for this owner"))
            parts.append(part)
        return OwnerKeyset.joined(parts)

    def _from_schema3_entry(self, owner_tag: bytes, version: int,
                            schema3_entry: list[OwnerKeyset | None]) -> OwnerKeyset | None:
        """A recorded version from the owner's entry of schema 3 and before (read once per load into
        ``schema3_entry``).
        Read only: copying a live key into a new entry could land late, after a shred (threat_model.md)."""
        if not schema3_entry:
            schema3_entry.append(self._entries.schema3_keyset(owner_tag))
        return schema3_entry[0].single(version) if schema3_entry[0] is not None else None

    def _owner_commitment(self, keyset: OwnerKeyset, version: int) -> bytes:
        return keyset.commitment(version, self._vault_id)

    @staticmethod
    def new_vault_id() -> bytes:
        """A random id for a new vault: it keeps two vaults on one keyring apart and is in every AAD."""
        return random_bytes(16)

    def forget(self, user_id: str) -> None:
        """Drop an owner's keyset from the cache."""
        self._cache.invalidate(("owner", user_id))

    def close(self) -> None:
        """Drop every cached key."""
        self._cache.clear()
        self.epochs.clear()

    def __repr__(self) -> str:
        return f"<KeyManager backend={self.backend_name}>"

    def __reduce__(self) -> NoReturn:
        raise TypeError("key material cannot be pickled")
