"""The vault's index key in KeyManager (keys/manager.py; threat_model.md, "Key commitments"), on a MemoryKeyring
that counts reads and records writes and a small double of the key records: the key is made and written once,
recorded and cached; a missing, malformed or replaced entry is KeyUnavailable with its remedy and never replaced
by a new key; a vault that recorded no commitment records the loaded key's, so a later swap is caught. Also the
rest of the manager's plumbing: the vault id, the epoch commitment read uncached, the refusal to pickle, and the
settings its constructor passes on (the epoch skew, the age at which a reservation is abandoned).
"""

from __future__ import annotations

import pickle
import re

import pytest

from keys.blind_index import IndexKey
from keys.epochs.schedule import DEFAULT_SKEW_SECONDS
from keys.errors import KeyUnavailable
from keys.keyring.cache import CacheLimits
from keys.keyring.edge import KeyringEdge
from keys.keyring.entries import MAX_VERSION
from keys.manager import KeyManager
from keys.testing import MemoryKeyring

VAULT_ID = bytes(range(16))
ENTRY = ("scratchvault/" + VAULT_ID.hex() + "/index", "index")
KEY, OTHER_KEY = IndexKey(bytes(range(32))), IndexKey(bytes(range(1, 33)))
TIMEOUT = 5.0
MISSING = ("this vault's index key is missing from the OS keyring (wrong keyring, or it was deleted); restore the "
           "keyring from backup. Without it no row can be found; a new key is never made over an existing vault")
MALFORMED = "the keyring entry for the vault index key is malformed; restore it from the keyring backup"
REPLACED = ("the OS keyring returned a different index key than the one this vault recorded (the entry was replaced, "
            "truncated, or this is another keyring); restore it from the keyring backup")


class WrittenKeyring(MemoryKeyring):
    """The in-memory keyring (``reads`` counts reads), recording every write in ``written``."""

    def __init__(self, index_entry: str | None = None) -> None:
        super().__init__()
        self.written: list[tuple[str, str]] = []
        if index_entry is not None:
            self.secrets[ENTRY] = index_entry

    def set_password(self, service: str, username: str, password: str) -> None:
        self.written.append((service, username))
        super().set_password(service, username, password)


class Records:
    """The key records the manager reads here, as a store keeps them: the index commitment (the first recorded
    stays), every value handed to ``record_index_commitment``, the epoch commitments by (length, epoch) with each
    read in ``epoch_reads``, and each owner version reservation's arguments (answered with a version past
    MAX_VERSION, so a making of a version ends right after its reservation)."""

    def __init__(self, index: bytes | None = None, epochs: dict[tuple[int, int], tuple[int, bytes]] | None = None):
        self.index = index
        self.recorded: list[bytes] = []
        self.epochs = epochs or {}
        self.epoch_reads: list[tuple[int, int]] = []
        self.reservations: list[tuple[bytes, float, float]] = []

    def index_commitment(self) -> bytes | None:
        return self.index

    def record_index_commitment(self, value: bytes) -> None:
        self.recorded.append(value)
        if self.index is None:
            self.index = value

    def epoch_commitment(self, length: int, epoch: int) -> tuple[int, bytes] | None:
        self.epoch_reads.append((length, epoch))
        return self.epochs.get((length, epoch))

    def version_tops(self) -> list[tuple[bytes, int]]:
        return []

    def reserve_owner_version(self, owner_tag: bytes, now: float, abandon_before: float) -> int:
        self.reservations.append((owner_tag, now, abandon_before))
        return MAX_VERSION + 1


def manager(ring: MemoryKeyring, records: Records, **settings: int) -> KeyManager:
    return KeyManager(KeyringEdge(ring, timeout=TIMEOUT), VAULT_ID, records,
                      cache=CacheLimits(ttl_seconds=60.0, max_entries=8), **settings)


def entry_of(key: IndexKey) -> str:
    return key.serialize().reveal()


def test_a_new_index_key_is_written_once_recorded_and_then_served_without_a_keyring_read():
    ring, records = WrittenKeyring(), Records()
    keys = manager(ring, records)
    key = keys.create_index_key()
    assert ring.written == [ENTRY] and ring.secrets[ENTRY] == entry_of(key)
    assert ring.reads == 1  # the keyring edge's read-back of the write
    assert records.recorded == [key.commitment(VAULT_ID)]
    assert keys.index_key() is key and keys.cached_index_key() is key
    assert ring.reads == 1 and ring.written == [ENTRY]


def test_the_index_key_is_read_from_the_keyring_once_then_served_from_the_cache():
    ring = WrittenKeyring(entry_of(KEY))
    keys = manager(ring, Records(KEY.commitment(VAULT_ID)))
    first = keys.index_key()
    assert first.commitment(VAULT_ID) == KEY.commitment(VAULT_ID)
    assert keys.index_key() is first and keys.cached_index_key() is first
    assert ring.reads == 1 and ring.written == []


def test_a_vault_that_recorded_no_index_commitment_records_the_loaded_keys_and_then_refuses_a_swapped_key():
    ring, records = WrittenKeyring(entry_of(KEY)), Records()
    manager(ring, records).index_key()
    assert records.recorded == [KEY.commitment(VAULT_ID)] and ring.written == []
    ring.secrets[ENTRY] = entry_of(OTHER_KEY)
    with pytest.raises(KeyUnavailable, match=f"^{re.escape(REPLACED)}$"):
        manager(ring, records).index_key()
    assert records.recorded == [KEY.commitment(VAULT_ID)]


def test_a_replaced_index_key_is_key_unavailable_with_the_remedy_and_is_never_cached():
    ring = WrittenKeyring(entry_of(OTHER_KEY))
    keys = manager(ring, Records(KEY.commitment(VAULT_ID)))
    for reads in (1, 2):
        with pytest.raises(KeyUnavailable, match=f"^{re.escape(REPLACED)}$"):
            keys.index_key()
        assert ring.reads == reads and keys.cached_index_key() is None
    assert ring.written == []


def test_a_missing_index_key_is_key_unavailable_with_the_remedy_and_no_key_is_made():
    ring, records = WrittenKeyring(), Records(KEY.commitment(VAULT_ID))
    with pytest.raises(KeyUnavailable, match=f"^{re.escape(MISSING)}$"):
        manager(ring, records).index_key()
    assert ring.secrets == {} and ring.written == [] and records.recorded == []


@pytest.mark.parametrize("stored", ["", "not json", '{"format": "scratchvault-key/1", "key": "AAAA"}'])
def test_a_malformed_index_entry_is_key_unavailable_naming_the_vault_index_key(stored):
    ring, records = WrittenKeyring(stored), Records(KEY.commitment(VAULT_ID))
    with pytest.raises(KeyUnavailable, match=f"^{re.escape(MALFORMED)}$"):
        manager(ring, records).index_key()
    assert ring.secrets[ENTRY] == stored and ring.written == [] and records.recorded == []


def test_the_cached_index_key_asks_the_keyring_nothing_and_is_gone_after_close():
    ring = WrittenKeyring(entry_of(KEY))
    keys = manager(ring, Records(KEY.commitment(VAULT_ID)))
    assert keys.cached_index_key() is None and ring.reads == 0
    loaded = keys.index_key()
    assert keys.cached_index_key() is loaded and ring.reads == 1
    keys.close()
    assert keys.cached_index_key() is None and ring.reads == 1


def test_a_new_vault_id_is_16_random_bytes():
    drawn = {KeyManager.new_vault_id() for _ in range(8)}
    assert {len(vault_id) for vault_id in drawn} == {16} and len(drawn) == 8


def test_the_epoch_commitment_is_the_recorded_keys_read_from_the_records_each_time_or_none_once_closed():
    records = Records(epochs={(3600, 5): (2, b"commitment")})
    keys = manager(WrittenKeyring(), records)
    assert keys.epoch_commitment((3600, 5)) == b"commitment"
    assert keys.epoch_commitment((3600, 5)) == b"commitment"
    assert keys.epoch_commitment((3600, 6)) is None
    assert records.epoch_reads == [(3600, 5), (3600, 5), (3600, 6)]


def test_a_key_manager_refuses_pickling_saying_why():
    keys = manager(WrittenKeyring(), Records())
    keys.create_index_key()
    with pytest.raises(TypeError, match=f"^{re.escape('key material cannot be pickled')}$"):
        pickle.dumps(keys)


def test_the_epoch_length_and_skew_given_reach_the_epoch_keys():
    assert manager(WrittenKeyring(), Records()).epochs.skew == DEFAULT_SKEW_SECONDS
    epochs = manager(WrittenKeyring(), Records(), epoch_seconds=60, epoch_skew_seconds=7).epochs
    assert (epochs.length, epochs.skew) == (60, 7)


def test_an_owner_version_reservation_abandons_those_older_than_twice_the_keyring_timeout_and_a_minute():
    ring, records = WrittenKeyring(entry_of(KEY)), Records(KEY.commitment(VAULT_ID))
    with pytest.raises(KeyUnavailable):  # the version reserved is past MAX_VERSION: no key is made
        manager(ring, records).rotate_owner_keyset("alice")
    [(owner_tag, now, abandon_before)] = records.reservations
    assert owner_tag == KEY.owner_tag("alice")
    assert now - abandon_before == pytest.approx(2 * TIMEOUT + 60.0, abs=1e-3)
