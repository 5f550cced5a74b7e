"""No key the code handles, derived ones included, reaches a traceback: a row's data key, the HKDF outputs (turn
summary keys, check keys, epoch wrap keys, the index key's subkeys) and the AEAD's key, besides the keys the
keyring holds. Each error the public API raises on a path that touches keys is searched as rendered with locals
and through every frame's locals (tests/support/key_traces.py)."""

from __future__ import annotations

import io
from collections.abc import Callable

import pytest
from keyring.backend import KeyringBackend
from keyring.errors import KeyringLocked

from keys.testing import MemoryKeyring
from tests.support.fault_counts import FaultDouble, Switch
from tests.support.key_traces import KeyRecorder, traceback_leaks
from vault import IntegrityError, KeyUnavailable, Principal, Vault, VaultError

ALICE = Principal("alice")
LONG = "observation " * 20000  # several 64 KiB chunks


class Failing(MemoryKeyring, FaultDouble):
    """A MemoryKeyring whose named operations raise KeyringLocked while ``failing`` holds them, counting them."""

    failing = Switch()

    def _check(self, operation: str) -> None:
        if self.failing and operation in self.failing:
            self.failed()
            raise KeyringLocked("collection is locked")

    def get_password(self, service: str, username: str) -> str | None:
        self._check("get")
        return super().get_password(service, username)

    def set_password(self, service: str, username: str, password: str) -> None:
        self._check("set")
        super().set_password(service, username, password)

    def delete_password(self, service: str, username: str) -> None:
        self._check("delete")
        super().delete_password(service, username)


KeyringBackend._classes.discard(Failing)


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> KeyRecorder:
    return KeyRecorder().install(monkeypatch)


def raised(call: Callable[[], object]) -> VaultError:
    """The VaultError ``call`` raises (KeyUnavailable or IntegrityError), caught in a frame that holds no key."""
    with pytest.raises((KeyUnavailable, IntegrityError)) as caught:
        call()
    return caught.value


def raised_if_any(call: Callable[[], object]) -> VaultError | None:
    """The KeyUnavailable or IntegrityError ``call`` raises, or None, caught in a frame that holds no key."""
    try:
        call()
    except (KeyUnavailable, IntegrityError) as error:
        return error
    return None


def assert_no_key(error: BaseException, recorder: KeyRecorder, ring: MemoryKeyring) -> None:
    recorder.add_keyring(ring)
    assert traceback_leaks(error, recorder) == []


@pytest.mark.parametrize("part", ["wrapped_key", "metadata", "summary", "chunk"])
def test_a_tampered_record_of_each_kind_leaves_no_derived_key_in_the_traceback_of_reads_and_writes(
        part, vault, keyring_backend, attacker, recorder):
    row = vault.put(ALICE, "t", 1, "x", LONG).id
    vault.list_for_turn(ALICE, "t")  # the turn summary key derived too
    attacker.flip(attacker.seq_of(row), part, chunk=1 if part == "chunk" else None)
    reads = [lambda: vault.get(ALICE, row)]
    if part != "summary":  # a streaming read opens metadata and only the chunks its slice needs
        reads.append(lambda: vault.read(ALICE, row, "range", start=70000, end=140000))
    for read in reads:
        assert_no_key(raised(read), recorder, keyring_backend)
    vault.rotate_owner_key("alice")
    writes = [lambda: vault.extend_turn(ALICE, "t", 7200), lambda: vault.rewrap("alice"),
              lambda: vault.delete(ALICE, row)]
    errors = [error for error in map(raised_if_any, writes) if error is not None]
    assert errors or part == "chunk", "no write refused the tampered record"  # chunks are opened by reads only
    for error in errors:
        assert_no_key(error, recorder, keyring_backend)


def test_a_listing_of_a_tampered_summary_leaves_no_derived_key_in_the_traceback(
        vault, keyring_backend, attacker, recorder):
    row = vault.put(ALICE, "t", 1, "x", "hello").id
    attacker.flip(attacker.seq_of(row), "summary")
    assert_no_key(raised(lambda: vault.list_for_turn(ALICE, "t")), recorder, keyring_backend)


def test_a_streamed_put_and_keyring_faults_leave_no_derived_key_in_the_traceback(db_path, clock, recorder):
    ring = Failing()
    with Vault.open(db_path, keyring_backend=ring, clock=clock, key_cache_seconds=1e-6) as vault:
        row = vault.put(ALICE, "t", 1, "x", io.BytesIO(LONG.encode())).id
        for operations, call in (({"get"}, lambda: vault.read(ALICE, row)),
                                 ({"set"}, lambda: vault.rotate_owner_key("alice")),
                                 ({"set"}, lambda: vault.put(Principal("bob"), "t", 1, "x", "new owner")),
                                 ({"get"}, lambda: vault.put(ALICE, "t", 2, "x", io.BytesIO(b"streamed")))):
            ring.failing, failures_before = operations, ring.failures
            error = raised(call)
            ring.failing = set()
            assert ring.failures > failures_before, operations
            assert_no_key(error, recorder, ring)


def test_a_row_under_a_retired_version_leaves_no_derived_key_in_the_traceback(
        vault, keyring_backend, attacker, recorder):
    row = vault.put(ALICE, "t", 1, "x", "old version").id
    saved = attacker.save_row(attacker.seq_of(row))
    vault.rotate_owner_key("alice")
    vault.rewrap("alice")
    recorder.add_keyring(keyring_backend)  # the retired version's key, before the retirement destroys it
    vault.retire_old_key_versions("alice")
    attacker.restore_row(saved)
    error = raised(lambda: vault.get(ALICE, row))
    assert_no_key(error, recorder, keyring_backend)


def test_a_shred_with_a_failing_keyring_leaves_no_derived_key_in_the_traceback(db_path, clock, recorder):
    """gc reports keyring faults instead of raising; a shred raises them, after it handled every epoch key."""
    ring = Failing()
    with Vault.open(db_path, keyring_backend=ring, clock=clock, key_cache_seconds=1e-6, epoch_seconds=3600) as vault:
        vault.put(ALICE, "t", 1, "x", LONG, ttl_seconds=60)
        clock.advance(3 * 86400)
        recorder.add_keyring(ring)
        for operations in ({"delete"}, {"get"}):
            ring.failing, failures_before = operations, ring.failures
            error = raised(lambda: vault.shred_owner("alice"))
            ring.failing = set()
            assert ring.failures > failures_before, operations
            assert_no_key(error, recorder, ring)
