"""The doubles tests/unit/test_owner_key_versions.py, test_owner_keyset_loading.py and test_owner_key_destruction.py
make, load and destroy owners' key versions over (keys/manager.py): a MemoryKeyring that records each entry it is
asked for and can fail writes, and the owner key records as a test sets them, without a database, keeping each
reservation's and each tombstone's arguments."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import cast

from keys.commitments import KeyRecords
from keys.crypto.aead import KEY_SIZE
from keys.errors import VaultError
from keys.keyring.cache import CacheLimits
from keys.keyring.edge import KeyringEdge
from keys.manager import KeyManager
from keys.owner_keyset import OwnerKeyset
from keys.testing import MemoryKeyring
from tests.support.fault_counts import FaultDouble, Switch

VAULT_ID = bytes(range(16))
PREFIX = f"scratchvault/{VAULT_ID.hex()}"
SERVICE, SCHEMA3_SERVICE = PREFIX + "/owner-key", PREFIX + "/owner"
TIMEOUT = 5
ALICE, BOB = "alice", "bob"


class WatchedKeyring(MemoryKeyring, FaultDouble):
    """The in-memory keyring, recording (service, user) of every read in ``asked``; a write to a service in
    ``failing_writes`` raises (and counts the failure)."""

    failing_writes = Switch()

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[tuple[str, str]] = []

    def get_password(self, service: str, username: str) -> str | None:
        self.asked.append((service, username))
        return super().get_password(service, username)

    def set_password(self, service: str, username: str, password: str) -> None:
        if self.failing_writes and service in self.failing_writes:
            self.failed()
            raise OSError("the keyring refused the write")
        super().set_password(service, username, password)

    def versions_read(self, owner_tag: bytes) -> list[int]:
        """The owner's key versions whose entries were asked for, in order."""
        return [int(user.partition(".")[2]) for service, user in self.asked
                if service == SERVICE and user.startswith(owner_tag.hex() + ".")]

    def present(self, owner_tag: bytes) -> set[int]:
        """The owner's key versions that have an entry."""
        return {int(user.partition(".")[2]) for service, user in self.secrets
                if service == SERVICE and user.startswith(owner_tag.hex() + ".")}


class OwnerRecords:
    """The owner key records the manager uses: commitments, rows' key versions, reservations, tombstones (each
    (owner tag, version) -> swept). It keeps each reservation's and each tombstone call's arguments and counts
    locks and reads of the version tops. ``reserve_as``: the version the next reservation gets (else one above every
    version it knows); ``abandoned``: every reservation is stale when checked; ``row_after_record``: what the
    database holds once a commitment is recorded (a conflicting row); ``tombstone_error``: what tombstoning raises."""

    def __init__(self) -> None:
        self.commitments: dict[bytes, dict[int, bytes]] = {}
        self.in_use: dict[bytes, dict[int, int]] = {}
        self.reserved: set[tuple[bytes, int]] = set()
        self.tombs: dict[tuple[bytes, int], bool] = {}
        self.reservations: list[tuple[bytes, float, float]] = []
        self.tombstone_calls: list[tuple[bytes, set[int] | None]] = []
        self.index: bytes | None = None
        self.reserve_as: int | None = None
        self.abandoned = False
        self.row_after_record: bytes | None = None
        self.tombstone_error: VaultError | None = None
        self.locks = 0
        self.tops_reads = 0

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        self.locks += 1
        yield

    def index_commitment(self) -> bytes | None:
        return self.index

    def record_index_commitment(self, value: bytes) -> None:
        self.index = value

    def known(self, owner_tag: bytes) -> set[int]:
        """Every version of the owner reserved, recorded or tombstoned."""
        return ({version for tag, version in self.reserved | set(self.tombs) if tag == owner_tag}
                | set(self.commitments.get(owner_tag, {})))

    def reserve_owner_version(self, owner_tag: bytes, now: float, abandon_before: float) -> int:
        self.reservations.append((owner_tag, now, abandon_before))
        version = self.reserve_as if self.reserve_as is not None else max(self.known(owner_tag), default=0) + 1
        self.reserved.add((owner_tag, version))
        return version

    def version_pending(self, owner_tag: bytes, version: int) -> bool:
        return (not self.abandoned and (owner_tag, version) in self.reserved and (owner_tag, version) not in self.tombs
                and version not in self.commitments.get(owner_tag, {}))

    def owner_commitments(self, owner_tag: bytes) -> dict[int, bytes]:
        return dict(self.commitments.get(owner_tag, {}))

    def key_versions_in_use(self, owner_tag: bytes) -> dict[int, int]:
        return dict(self.in_use.get(owner_tag, {}))

    def record_owner_commitment(self, owner_tag: bytes, version: int, value: bytes, sealed_name: bytes) -> None:
        if (owner_tag, version) not in self.tombs:
            self.commitments.setdefault(owner_tag, {}).setdefault(version, self.row_after_record or value)

    def tombstone_owner_versions(self, owner_tag: bytes, versions: set[int] | None) -> set[int]:
        self.tombstone_calls.append((owner_tag, None if versions is None else set(versions)))
        if self.tombstone_error is not None:
            raise self.tombstone_error
        destroyed = self.known(owner_tag) if versions is None else set(versions)
        for version in destroyed:
            self.commitments.get(owner_tag, {}).pop(version, None)
            self.tombs[(owner_tag, version)] = False
        return destroyed

    def version_tops(self) -> list[tuple[bytes, int]]:
        self.tops_reads += 1
        tags = {tag for tag, _ in self.reserved | set(self.tombs)} | set(self.commitments)
        return [(tag, max(self.known(tag))) for tag in sorted(tags)]

    def tombstones(self, owner_tag: bytes | None, unswept_only: bool) -> list[tuple[bytes, int, bool]]:
        return [(tag, version, swept) for (tag, version), swept in sorted(self.tombs.items())
                if owner_tag in (None, tag) and not (unswept_only and swept)]

    def mark_swept(self, owner_tag: bytes, versions: list[int]) -> None:
        for version in versions:
            self.tombs[(owner_tag, version)] = True


def scene(records: OwnerRecords | None = None) -> tuple[KeyManager, OwnerRecords, WatchedKeyring]:
    """A key manager over a watched keyring and the records double (a minute's cache of 64 keys), its index key
    made; nothing asked of the keyring yet."""
    records, ring = records or OwnerRecords(), WatchedKeyring()
    # the double holds owner records only: nothing these tests call asks for an expiry epoch's records
    manager = KeyManager(KeyringEdge(ring, timeout=TIMEOUT), VAULT_ID, cast(KeyRecords, records),
                         cache=CacheLimits(60, 64))
    manager.create_index_key()
    ring.asked.clear()
    return manager, records, ring


def tag_of(manager: KeyManager, user_id: str) -> bytes:
    return manager.index_key().owner_tag(user_id)


def made_elsewhere(ring: MemoryKeyring, records: OwnerRecords, owner_tag: bytes, *versions: int) -> OwnerKeyset:
    """Versions another process made: each one's entry written and its commitment recorded."""
    parts = [OwnerKeyset.generate(version) for version in versions]
    for version, part in zip(versions, parts, strict=True):
        ring.secrets[(SERVICE, f"{owner_tag.hex()}.{version}")] = part.entry(version).reveal()
        records.commitments.setdefault(owner_tag, {})[version] = part.commitment(version, VAULT_ID)
        records.reserved.add((owner_tag, version))
    joined = OwnerKeyset.joined(parts)
    assert joined is not None
    return joined


def plant(ring: MemoryKeyring, owner_tag: bytes, *versions: int) -> None:
    """Entries of these versions that the database does not record (a write given up that landed late)."""
    for version in versions:
        ring.secrets[(SERVICE, f"{owner_tag.hex()}.{version}")] = OwnerKeyset.generate(version).entry(version).reveal()


def schema3_entry(ring: MemoryKeyring, records: OwnerRecords, owner_tag: bytes, *versions: int) -> OwnerKeyset:
    """The owner's entry of schema 3 and before, holding ``versions`` (each recorded), as an old file left it."""
    keyset = OwnerKeyset(max(versions), {version: bytes([version]) * KEY_SIZE for version in versions})
    ring.secrets[(SCHEMA3_SERVICE, owner_tag.hex())] = keyset.serialize().reveal()
    for version in versions:
        records.commitments.setdefault(owner_tag, {})[version] = keyset.commitment(version, VAULT_ID)
    return keyset


def set_mark(ring: MemoryKeyring, kind: str, owner_tag: bytes, value: int) -> None:
    """An owner mark (keys/keyring/owner_marks.py) as the keyring holds it."""
    ring.secrets[(f"{PREFIX}/owner-{kind}", owner_tag.hex())] = str(value)


def mark(ring: MemoryKeyring, kind: str, owner_tag: bytes) -> str | None:
    return ring.secrets.get((f"{PREFIX}/owner-{kind}", owner_tag.hex()))
