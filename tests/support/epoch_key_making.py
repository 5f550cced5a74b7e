"""The doubles tests/unit/test_epoch_key_making.py makes expiry epoch keys over (keys/epochs/keys.py): a
MemoryKeyring that records each name it is asked for, and the epoch records as a test sets them, without a
database."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from keys.epochs.epoch_key import EpochKey
from keys.epochs.keys import EpochKeys
from keys.epochs.lengths import MADE
from keys.epochs.marks import MARKER, marker_name
from keys.epochs.schedule import Epoch
from keys.epochs.sweep import Attempt
from keys.keyring.cache import CacheLimits
from keys.keyring.edge import KeyringEdge
from keys.testing import MemoryKeyring
from tests.support.fault_counts import FaultDouble, Switch

VAULT_ID = bytes(range(16))
SERVICE = f"scratchvault/{VAULT_ID.hex()}/epoch-key"
E, SKEW, TIMEOUT = 3600, 300, 5
NUMBER = 10
EPOCH = (E, NUMBER)
START, END = NUMBER * E, (NUMBER + 1) * E
MARK, MADE_MARK = marker_name(E, MARKER), marker_name(E, MADE)


class WatchedKeyring(MemoryKeyring, FaultDouble):
    """The in-memory keyring, recording the user name of every read in ``asked``; a read of a name in ``failing``
    raises (and counts the failure)."""

    failing = Switch()

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    def get_password(self, service: str, username: str) -> str | None:
        self.asked.append(username)
        if self.failing and username in self.failing:
            self.failed()
            raise OSError("the keyring is gone")
        return super().get_password(service, username)

    def entries(self) -> dict[str, str]:
        """The epoch keys' service as it stands: user name to secret."""
        return {user: secret for (service, user), secret in self.secrets.items() if service == SERVICE}


class Records:
    """The epoch records the key maker uses: commitments, closed epochs, tombstones, the first attempt reserved; it
    keeps each reservation's arguments and counts commitment reads and locks. ``abandoned``: every reservation is
    stale when checked; ``dead_rows``: key rows a tombstone names; ``row_after_record``: what the database holds
    once a commitment is recorded (a conflicting row); ``on_reserve``: another process, before the key lock."""

    def __init__(self, first_attempt: int = 1) -> None:
        self.commitments: dict[Epoch, tuple[int, bytes]] = {}
        self.closed: set[Epoch] = set()
        self.first_attempt = first_attempt
        self.last_reserved: dict[Epoch, int] = {}
        self.tombstoned: list[Attempt] = []
        self.reservations: list[tuple[int, int, float, float]] = []
        self.dead_rows: dict[Epoch, int] = {}
        self.abandoned = False
        self.row_after_record: tuple[int, bytes] | None = None
        self.on_reserve: Callable[[], None] | None = None
        self.reads = 0
        self.locks = 0

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        self.locks += 1
        yield

    def epoch_commitment(self, length: int, epoch: int) -> tuple[int, bytes] | None:
        self.reads += 1
        return self.commitments.get((length, epoch))

    def reserve_epoch(self, length: int, epoch: int, now: float, abandon_before: float) -> int | None:
        self.reservations.append((length, epoch, now, abandon_before))
        if (length, epoch) in self.closed:
            return None
        attempt = self.last_reserved[(length, epoch)] = self.last_reserved.get((length, epoch),
                                                                                self.first_attempt - 1) + 1
        if self.on_reserve is not None:
            self.on_reserve()
        return attempt

    def epoch_pending(self, length: int, epoch: int, attempt: int) -> bool:
        return not self.abandoned and (length, epoch, attempt) not in self.tombstoned

    def record_epoch_commitment(self, length: int, epoch: int, attempt: int, value: bytes) -> None:
        if (length, epoch) not in self.commitments:
            self.commitments[(length, epoch)] = self.row_after_record or (attempt, value)

    def tombstone_epoch_attempt(self, length: int, epoch: int, attempt: int) -> None:
        self.tombstoned.append((length, epoch, attempt))

    def recorded_attempt(self, length: int, epoch: int) -> int | None:
        recorded = self.commitments.get((length, epoch))
        return recorded[0] if recorded is not None else self.dead_rows.get((length, epoch))


def scene(records: Records | None = None, ring: WatchedKeyring | None = None) -> tuple[EpochKeys, Records,
                                                                                       WatchedKeyring]:
    """Epoch keys of length E over a watched keyring and the records double (a minute's cache of 64 keys)."""
    records, ring = records or Records(), ring or WatchedKeyring()
    epochs = EpochKeys(KeyringEdge(ring, timeout=TIMEOUT), VAULT_ID, records, cache=CacheLimits(60, 64), length=E,
                       skew=SKEW)
    return epochs, records, ring


def name(attempt: int, number: int = NUMBER) -> str:
    return f"{E}.{number}.{attempt}"


def commitment(key: EpochKey) -> bytes:
    return key.commitment(VAULT_ID, *EPOCH)


def stored_key(ring: WatchedKeyring, attempt: int) -> EpochKey:
    """Write a key under an attempt's name, as another process would."""
    key = EpochKey.generate()
    ring.secrets[(SERVICE, name(attempt))] = key.entry().reveal()
    return key
