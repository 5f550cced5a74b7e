"""Owner key versions in the OS keyring: one write-once entry per (owner, version).

Service ``scratchvault/<vault_id hex>/owner-key``, user ``<owner tag hex>.<version>``, the password one key
(``scratchvault-key/1``, as the index key). A version is reserved in the database before its entry is written
and is usable only once its commitment is recorded; a destroyed version (shred, retirement, an abandoned
reservation) gets a tombstone, and an entry found under a tombstoned version is deleted on sight and counted.
Files made before schema 4 kept every version in one mutable entry (service ``.../owner``, user ``<owner tag
hex>``): its recorded versions are read from it, never copied or rewritten, and it is deleted once none of them
is live (threat_model.md, "Keyring entries").

How far a shred looks in the keyring never rests on the database alone: versions 1 to ALWAYS_PROBED are always asked
for, and a version above that is written only after the owner's ``issued-through`` mark (service
``.../owner-issued``, user the owner tag in hex, the password a decimal number, never lowered) covers it; the probe
goes to the highest of the two bounds and of what the database lists, then PROBE_GAP further misses.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from keys.blind_index import tags_equal
from keys.keyring_edge import KeyringEdge
from keys.keyset import OwnerKeyset, parse_single_key
from keys.secret import Secret

if TYPE_CHECKING:
    from keys.commitments import KeyCommitments

ALWAYS_PROBED = 16  # versions a shred asks the keyring for whatever any record says; higher ones need the mark first
PROBE_GAP = 16  # misses past the highest bound a shred still looks for (versions made before the mark existed)
_MAX_DIGITS = 10  # a key version fits in 31 bits


class OwnerEntries:
    """Reads, writes once, and deletes the keyring entries of owner key versions."""

    __slots__ = ("_commitments", "_issued_service", "_keyring", "_legacy_service", "_lock", "_service", "_vault_id",
                 "destroyed_on_sight")

    def __init__(self, keyring: KeyringEdge, vault_id: bytes, commitments: KeyCommitments) -> None:
        self._keyring, self._commitments, self._vault_id = keyring, commitments, vault_id
        prefix = "scratchvault/" + vault_id.hex()
        self._service, self._legacy_service = prefix + "/owner-key", prefix + "/owner"
        self._issued_service = prefix + "/owner-issued"
        self._lock = threading.Lock()
        self.destroyed_on_sight = 0  # entries found under destroyed versions (or a fresh one) and deleted

    def read(self, owner_tag: bytes, version: int) -> OwnerKeyset | None:
        """The keyset of one version, or None when its entry does not exist."""
        stored = self._keyring.get(self._service, _name(owner_tag, version))
        return None if stored is None else OwnerKeyset(version, {version: parse_single_key(stored, "owner key")})

    def write_new(self, owner_tag: bytes, version: int, keyset: OwnerKeyset) -> None:
        """Write a version's entry once. The caller holds its reservation and the database write lock, so an
        entry already there was left by a write that was given up, or under a reservation a writer of the
        file rolled back: never adopted, deleted and counted first."""
        name = _name(owner_tag, version)
        if version > ALWAYS_PROBED:
            self._cover(owner_tag, version)
        if self._keyring.get(self._service, name) is not None:
            self._keyring.delete(self._service, name)
            self._count(1)
        self._keyring.set(self._service, name, keyset.entry(version))

    def issued_through(self, owner_tag: bytes) -> int:
        """The owner's mark: the highest version any entry may have been written under (0 when it has none; an
        unreadable value counts as none, so the probe still covers ALWAYS_PROBED)."""
        stored = self._keyring.get(self._issued_service, owner_tag.hex())
        text = "" if stored is None else stored.reveal()
        return int(text) if 0 < len(text) <= _MAX_DIGITS and text.isascii() and text.isdigit() else 0

    def _cover(self, owner_tag: bytes, version: int) -> None:
        """Raise the owner's mark to ``version`` before its entry is written (never lowered; a keyring that fails
        fails the write, so no entry exists beyond what a shred probes)."""
        if self.issued_through(owner_tag) < version:
            self._keyring.set(self._issued_service, owner_tag.hex(), Secret(str(version)))

    def legacy(self, owner_tag: bytes) -> OwnerKeyset | None:
        """The owner's keyset in the layout of files made before schema 4, if that entry still exists."""
        stored = self._keyring.get(self._legacy_service, owner_tag.hex())
        return None if stored is None else OwnerKeyset.parse(stored)

    def legacy_live_versions(self, owner_tag: bytes) -> set[int] | None:
        """The versions the owner's old-layout entry holds that the database records with this very key (None when
        there is no such entry): the live keys still kept there."""
        legacy = self.legacy(owner_tag)
        if legacy is None:
            return None
        recorded = self._commitments.owner_commitments(owner_tag)
        return {version for version in legacy.versions if version in recorded
                and tags_equal(recorded[version], legacy.commitment(version, self._vault_id))}

    def _delete_legacy_if_dead(self, owner_tag: bytes) -> None:
        """Delete the owner's entry of the old layout once no live key is kept there (it is never rewritten: a
        late rewrite could bring back a destroyed key, so it is deleted whole or kept)."""
        if self.legacy_live_versions(owner_tag) == set():
            self._keyring.delete(self._legacy_service, owner_tag.hex())

    def sweep(self, owner_tag: bytes | None, *, everything: bool = False, destroyed: set[int] = frozenset()) -> int:
        """Delete the entries of destroyed versions (of one owner, or all) not yet known gone, and each such
        owner's old-layout entry; ``everything`` looks again under those already swept; ``destroyed``: versions of
        ``owner_tag`` this process destroyed, deleted whatever the database's tombstones say. Returns how many
        entries came back after they were known gone (a write given up that landed late): counted."""
        late = 0
        tombstones = self._commitments.tombstones(owner_tag, unswept_only=not everything)
        if owner_tag is not None:  # a version destroyed here whose tombstone the database lost is swept as found
            listed = {version for tag, version, _ in self._commitments.tombstones(owner_tag, unswept_only=False)}
            tombstones = tombstones + [(owner_tag, version, True) for version in sorted(destroyed - listed)]
        for tag in sorted({tag for tag, _, _ in tombstones}):
            mine = [(version, swept) for other, version, swept in tombstones if other == tag]
            for version, swept in mine:
                name = _name(tag, version)
                if self._keyring.get(self._service, name) is not None:
                    self._keyring.delete(self._service, name)
                    late += swept
            self._delete_legacy_if_dead(tag)
            self._commitments.mark_swept(tag, [version for version, swept in mine if not swept])
        self._count(late)
        return late

    def destroy_unlisted(self, owner_tag: bytes, destroyed: set[int]) -> int:
        """After a shred: delete every entry of the owner the database does not list as live, found by asking the
        keyring for each version up to the highest of ALWAYS_PROBED, the owner's mark, ``destroyed`` (what the
        shred itself destroyed) and what the database lists, then PROBE_GAP further misses: a writer of the
        database who removed the versions' rows before the shred would otherwise keep their keys. Under the
        database write lock, so no version is written meanwhile; returns how many were found, and counts them."""
        with self._commitments.locked():
            live = set(self._commitments.owner_commitments(owner_tag))
            listed = [version for tag, version, _ in self._commitments.tombstones(owner_tag, unswept_only=False)
                      if tag == owner_tag]
            top = max([ALWAYS_PROBED, self.issued_through(owner_tag), *destroyed, *listed, *live])
            found, version, misses = 0, 0, 0
            while version < top or misses < PROBE_GAP:
                version += 1
                name = _name(owner_tag, version)
                if version in live or self._commitments.version_pending(owner_tag, version):
                    misses = 0
                elif self._keyring.get(self._service, name) is not None:
                    self._keyring.delete(self._service, name)
                    found, misses = found + 1, 0
                elif version > top:  # below the bound every version is asked for, present or not
                    misses += 1
        self._count(found)
        return found

    def _count(self, found: int) -> None:
        with self._lock:
            self.destroyed_on_sight += found


def _name(owner_tag: bytes, version: int) -> str:
    """The keyring user name of one version: the owner tag in hex (no user id in the keyring) and the version."""
    return f"{owner_tag.hex()}.{version}"
