"""Owner key versions in the OS keyring: one write-once entry per (owner, version).

Service ``scratchvault/<vault_id hex>/owner-key``, user ``<owner tag hex>.<version>``, the password one key
(``scratchvault-key/1``, as the index key). A version is reserved in the database before its entry is written
and is usable only once its commitment is recorded; a destroyed version (shred, retirement, an abandoned
reservation) gets a tombstone, and an entry found under a tombstoned version is deleted on sight and counted.
Files made before schema 4 kept every version in one mutable entry (service ``.../owner``, user ``<owner tag
hex>``): its recorded versions are read from it, never copied or rewritten, and it is deleted once none of them
is live (threat_model.md, "Keyring entries").

How far a shred or a retirement looks in the keyring never rests on the database alone: the owner's marks in the
keyring (keys/keyring/owner_marks.py) bound it, and a version the database numbers far past them is never written.
"""

from __future__ import annotations

import threading
from collections.abc import Set
from typing import TYPE_CHECKING

from keys.blind_index import tags_equal
from keys.errors import KeyUnavailable
from keys.keyring.edge import KeyringEdge
from keys.keyring.entries import parse_single_key
from keys.keyring.owner_marks import ALWAYS_PROBED, PROBE_GAP, OwnerMarks
from keys.owner_keyset import OwnerKeyset

if TYPE_CHECKING:
    from keys.commitments import KeyCommitments



class OwnerEntries:
    """Reads, writes once, and deletes the keyring entries of owner key versions."""

    __slots__ = (
        "_commitments",
        "_keyring",
        "_lock",
        "_schema3_service",
        "_service",
        "_vault_id",
        "destroyed_on_sight",
        "marks",
    )

    def __init__(self, keyring: KeyringEdge, vault_id: bytes, commitments: KeyCommitments) -> None:
        self._keyring, self._commitments, self._vault_id = keyring, commitments, vault_id
        prefix = "scratchvault/" + vault_id.hex()
        self._service, self._schema3_service = prefix + "/owner-key", prefix + "/owner"
        self.marks = OwnerMarks(keyring, vault_id)
        self._lock = threading.Lock()
        self.destroyed_on_sight = 0  # entries found under destroyed versions (or a fresh one) and deleted

    def read(self, owner_tag: bytes, version: int) -> OwnerKeyset | None:
        """The keyset of one version, or None when its entry does not exist."""
        stored = self._keyring.get(self._service, _name(owner_tag, version))
        return None if stored is None else OwnerKeyset(version, {version: parse_single_key(stored, "owner key")})

    def write_new(self, owner_tag: bytes, version: int, keyset: OwnerKeyset) -> None:
        """Write a version's entry once, after the owner's issued mark covers it (keys/keyring/owner_marks.py). The
        caller holds its reservation and the database write lock, so an entry already there was left by a write that was
        given up, or under a reservation a writer of the file rolled back: never adopted, deleted and counted
        first. A version the retired mark covers, or one numbered past the issued mark by more than PROBE_GAP (a
        reservation a writer of the database planted), is refused: nothing is written."""
        if version < self.marks.read("retired", owner_tag):
            raise KeyUnavailable("this owner key version was retired while it was being made; retry")
        if version > max(ALWAYS_PROBED, self.marks.read("issued", owner_tag)) + PROBE_GAP:
            raise KeyUnavailable("the database numbers this owner's next key version far past any the keyring "
                                 "issued (a writer of the database); nothing was written. Check it with 'scratchvault "
                                 "doctor'")
        if version > ALWAYS_PROBED:
            self.marks.raise_to("issued", owner_tag, version)
        name = _name(owner_tag, version)
        if self._keyring.get(self._service, name) is not None:
            self._keyring.delete(self._service, name)
            self._count(1)
        self._keyring.set(self._service, name, keyset.entry(version))

    def schema3_keyset(self, owner_tag: bytes) -> OwnerKeyset | None:
        """The owner's keyset in the layout of files made before schema 4, if that entry still exists."""
        stored = self._keyring.get(self._schema3_service, owner_tag.hex())
        return None if stored is None else OwnerKeyset.parse(stored)

    def schema3_live_versions(self, owner_tag: bytes) -> set[int] | None:
        """The versions the owner's old-layout entry holds that the database records with this very key (None when
        there is no such entry): the live keys still kept there."""
        schema3 = self.schema3_keyset(owner_tag)
        if schema3 is None:
            return None
        recorded = self._commitments.owner_commitments(owner_tag)
        return {version for version in schema3.versions if version in recorded
                and tags_equal(recorded[version], schema3.commitment(version, self._vault_id))}

    def _delete_schema3_entry_if_dead(self, owner_tag: bytes) -> None:
        """Delete the owner's entry of the old layout once no live key is kept there (it is never rewritten: a
        late rewrite could bring back a destroyed key, so it is deleted whole or kept)."""
        if self.schema3_live_versions(owner_tag) == set():
            self._keyring.delete(self._schema3_service, owner_tag.hex())

    def sweep(self, owner_tag: bytes | None, *, everything: bool = False,
              destroyed: Set[int] = frozenset()) -> int:
        """Delete the entries of destroyed versions (of one owner, or all) not yet known gone, and each such
        owner's old-layout entry; ``everything`` looks again under those already swept; ``destroyed``: versions of
        ``owner_tag`` this process destroyed, deleted whatever the database's tombstones say, as is every version
        the owner's retired mark covers and its swept mark does not yet. Returns how many entries came back after
        they were known gone (a write given up that landed late, or a tombstone a writer removed): counted."""
        late = 0
        if owner_tag is None:
            tombstones = self._commitments.tombstones(None, unswept_only=not everything)
        else:  # one read of the owner's tombstones; a version destroyed here that they lack is swept as found
            every = self._commitments.tombstones(owner_tag, unswept_only=False)
            tombstones = every if everything else [tombstone for tombstone in every if not tombstone[2]]
            listed = {version for _, version, _ in every}
            tombstones = tombstones + [(owner_tag, version, True) for version in sorted(destroyed - listed)]
            late += self._sweep_retired(owner_tag, listed | destroyed)
        for tag in sorted({tag for tag, _, _ in tombstones}):
            mine = [(version, swept) for other, version, swept in tombstones if other == tag]
            for version, swept in mine:
                if self._delete(tag, version) and swept:
                    late += 1
            self._delete_schema3_entry_if_dead(tag)
            self._commitments.mark_swept(tag, [version for version, swept in mine if not swept])
        self._count(late)
        return late

    def _sweep_retired(self, owner_tag: bytes, tombstoned: set[int]) -> int:
        """Delete the entries of versions the owner's retired mark covers and its swept mark does not, then raise the
        swept mark; returns how many were found that no tombstone named (a writer of the database removed it)."""
        retired = self.marks.read("retired", owner_tag)
        swept = self.marks.read("swept", owner_tag)
        found = sum(self._delete(owner_tag, version) and version not in tombstoned
                    for version in range(max(1, swept), retired))
        if swept < retired:
            self.marks.raise_to("swept", owner_tag, retired)
        return found

    def _delete(self, owner_tag: bytes, version: int) -> bool:
        """Delete one version's entry if it exists; whether it did. An entry that cannot be read (a keyring that
        reports it there but unreadable, such as OpenBao's deleted-but-undeletable version) is deleted all the
        same: unreadable is not absent, and a sweep is there to remove it; a keyring that is down fails the delete."""
        name = _name(owner_tag, version)
        try:
            present = self._keyring.get(self._service, name) is not None
        except KeyUnavailable:
            present = True
        if not present:
            return False
        self._keyring.delete(self._service, name)
        return True

    def retire_below(self, owner_tag: bytes, version: int) -> None:
        """Record in the keyring that every version of the owner below ``version`` is retired (before the database's
        tombstones commit): sweeps delete their entries whatever the database says, and none is written again."""
        self.marks.raise_to("retired", owner_tag, version)

    def destroy_unlisted(self, owner_tag: bytes, destroyed: set[int]) -> int:
        """After a shred: delete every entry of the owner but a version made since (numbered past everything the shred
        destroyed), found by asking the keyring for each version up to the owner's issued mark (or ALWAYS_PROBED)
        and PROBE_GAP more, and, by name, each higher version the database or the shred names: a writer of the
        database who removed or put back the versions' rows would otherwise keep their keys. Under the database
        write lock, so no version is written meanwhile; returns how many were found, and counts them."""
        newest = max(destroyed, default=0)
        with self._commitments.locked():
            newer = {version for version in self._commitments.owner_commitments(owner_tag) if version > newest}
            listed = {version for tag, version, _ in self._commitments.tombstones(owner_tag, unswept_only=False)
                      if tag == owner_tag}
            top = max(ALWAYS_PROBED, self.marks.read("issued", owner_tag)) + PROBE_GAP
            named = {version for version in listed | destroyed if version > top}
            found = 0
            for version in [*range(1, top + 1), *sorted(named)]:
                if version > newest and (version in newer or self._commitments.version_pending(owner_tag, version)):
                    continue
                found += self._delete(owner_tag, version)
        self._count(found)
        return found

    def _count(self, found: int) -> None:
        with self._lock:
            self.destroyed_on_sight += found


def _name(owner_tag: bytes, version: int) -> str:
    """The keyring user name of one version: the owner tag in hex (no user id in the keyring) and the version."""
    return f"{owner_tag.hex()}.{version}"
