"""Owner and index keys never reach a traceback rendered with its frames' locals (Sentry's default, the stdlib's
``TracebackException(capture_locals=True)``): every KeyUnavailable and IntegrityError that keys/ raises is
rendered that way, and neither the raw key bytes nor their Base64 or hex appear in it."""

from __future__ import annotations

import base64
import json
import time
import traceback

import pytest
from keyring.backend import KeyringBackend
from keyring.errors import KeyringLocked

from keys.testing import MemoryKeyring
from tests.support.fault_counts import FaultDouble, Switch
from vault import IntegrityError, KeyUnavailable, Principal, Vault, VaultError

ALICE = Principal("alice")


class Scripted(MemoryKeyring, FaultDouble):
    """A MemoryKeyring whose owner-key writes fail as told (``fail``): locked, or hanging past the vault's
    timeout; counted."""

    fail = Switch()

    def set_password(self, service: str, username: str, password: str) -> None:
        if self.fail and "/owner" in service:
            self.failed()
        if self.fail == "locked" and "/owner" in service:
            raise KeyringLocked("locked")
        if self.fail == "hang" and "/owner" in service:
            time.sleep(0.5)
        super().set_password(service, username, password)


KeyringBackend._classes.discard(Scripted)


def key_texts(ring: MemoryKeyring) -> set[str]:
    """Every key the keyring holds, as raw bytes (escaped as a repr shows them), Base64 and hex."""
    texts = set()
    for secret in ring.secrets.values():
        document = json.loads(secret)
        if not isinstance(document, dict):  # an expiry epoch's destroyed-through marker: a number, no key
            continue
        for encoded in [document["key"]] if "key" in document else document["keys"].values():
            raw = base64.b64decode(encoded)
            texts |= {encoded, raw.hex(), repr(raw)[2:-1], base64.b64encode(raw).decode()}
    return texts


def rendered(error: BaseException) -> str:
    return "".join(traceback.TracebackException.from_exception(error, capture_locals=True).format())


def leaks(error: BaseException, ring: MemoryKeyring, seen: set[str]) -> list[str]:
    text = rendered(error)
    return sorted(key for key in key_texts(ring) | seen if key in text)


def failure(call) -> VaultError:
    with pytest.raises((KeyUnavailable, IntegrityError)) as raised:
        call()
    return raised.value


def test_a_keyset_write_that_fails_or_times_out_leaves_no_key_in_the_traceback(db_path, clock):
    ring = Scripted()
    with Vault.open(db_path, keyring_backend=ring, clock=clock, keyring_timeout=0.2) as vault:
        vault.put(ALICE, "t", 1, "x", "first")
        seen = key_texts(ring)
        for mode, call in (("locked", lambda: vault.rotate_owner_key("alice")),
                           ("locked", lambda: vault.put(Principal("bob"), "t", 1, "x", "new owner")),
                           ("hang", lambda: vault.rotate_owner_key("alice"))):
            ring.fail = mode
            error = failure(call)
            time.sleep(0.6)  # a hung write lands in the end
            ring.fail = None
            assert leaks(error, ring, seen) == [], mode


def test_a_keyring_entry_that_fails_its_checks_leaves_no_key_in_the_traceback(db_path, clock):
    ring = MemoryKeyring()
    with Vault.open(db_path, keyring_backend=ring, clock=clock) as vault:
        row = vault.put(ALICE, "t", 1, "x", "hello").id
    seen = key_texts(ring)
    (owner_entry,) = [entry for entry in ring.secrets if entry[0].endswith("/owner-key")]
    (index_entry,) = [entry for entry in ring.secrets if entry[0].endswith("/index")]
    good_owner, good_index = ring.secrets[owner_entry], ring.secrets[index_entry]
    document = json.loads(good_owner)
    other = base64.b64encode(bytes(range(32))).decode()
    damaged_owner = {
        "replaced": json.dumps({**document, "key": other}),
        "extra member": json.dumps({**document, "note": 1}),
        "old layout": json.dumps({"format": "scratchvault-keyset/1", "primary": 1, "keys": {"1": document["key"]}}),
    }
    for name, entry in damaged_owner.items():
        ring.secrets[owner_entry] = entry
        with Vault.open(db_path, keyring_backend=ring, clock=clock) as vault:
            error = failure(lambda: vault.read(ALICE, row))
        assert leaks(error, ring, seen | key_texts(ring)) == [], name
    ring.secrets[owner_entry] = good_owner
    for name, entry in {"replaced": json.dumps({"format": "scratchvault-key/1", "key": other}),
                        "extra member": json.dumps({**json.loads(good_index), "note": 1})}.items():
        ring.secrets[index_entry] = entry
        error = failure(lambda: Vault.open(db_path, keyring_backend=ring, clock=clock))
        assert leaks(error, ring, seen | key_texts(ring)) == [], name


def test_a_tampered_row_leaves_no_key_in_the_traceback(vault, keyring_backend, attacker):
    row = vault.put(ALICE, "t", 1, "x", "hello " * 30000).id
    seen = key_texts(keyring_backend)
    for part in ("wrapped_key", "metadata", "summary"):
        attacker.flip(attacker.seq_of(row), part)
        error = failure(lambda: vault.get(ALICE, row))
        attacker.flip(attacker.seq_of(row), part)
        assert leaks(error, keyring_backend, seen) == [], part
    attacker.flip(attacker.seq_of(row), "chunk", chunk=1)
    assert leaks(failure(lambda: vault.get(ALICE, row)), keyring_backend, seen) == []


class Odd(MemoryKeyring, FaultDouble):
    """A MemoryKeyring that misbehaves as told (``mode``), counting each call it spoiled: entries read back as
    bytes or with a lone surrogate appended, or a write interrupted by a BaseException (a KeyboardInterrupt or a
    cancellation inside the backend)."""

    mode = Switch()

    def get_password(self, service: str, username: str):
        value = super().get_password(service, username)
        if value is not None and self.mode == "bytes":
            self.failed()
            return value.encode()
        if value is not None and self.mode == "surrogate":
            self.failed()
            return value + "\ud800"
        return value

    def set_password(self, service: str, username: str, password: str) -> None:
        if self.mode == "interrupt":
            self.failed()
            raise Interrupted("inside the backend")
        super().set_password(service, username, password)


class Interrupted(BaseException):
    """What a cancellation raises inside a backend call: not a keyring fault, so it passes through as itself."""


KeyringBackend._classes.discard(Odd)


def interrupted(call) -> Interrupted:
    """The Interrupted ``call`` raises, caught in a frame that holds no key (the test's own frame would)."""
    with pytest.raises(Interrupted) as raised:
        call()
    return raised.value


def test_odd_backend_answers_leave_no_key_in_the_traceback_and_raise_only_what_they_should(db_path, clock):
    ring = Odd()
    with Vault.open(db_path, keyring_backend=ring, clock=clock) as vault:
        vault.put(ALICE, "t", 1, "x", "hello")
        seen = key_texts(ring)
        ring.mode = "interrupt"
        error = interrupted(lambda: vault.rotate_owner_key("alice"))
        assert error.__context__ is None and leaks(error, ring, seen) == []
        ring.mode = "surrogate"  # the read-back differs: KeyUnavailable, not UnicodeEncodeError
        error = failure(lambda: vault.rotate_owner_key("alice"))
        assert isinstance(error, KeyUnavailable) and leaks(error, ring, seen | key_texts(ring)) == []
    ring.mode = "bytes"
    error = failure(lambda: Vault.open(db_path, keyring_backend=ring, clock=clock))
    assert isinstance(error, KeyUnavailable) and leaks(error, ring, seen | key_texts(ring)) == []
