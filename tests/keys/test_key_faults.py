"""Keyring trouble through the public API: every fault is KeyUnavailable with a remedy, nothing is written,
no row disappears, and no fresh key is ever generated over an owner the vault already knows."""

from __future__ import annotations

import base64
import json
import os
import re

import keyring
import pytest
from keyring.backend import KeyringBackend
from keyring.backends import chainer, fail, null
from keyring.errors import KeyringLocked

from keys.testing import MemoryKeyring
from tests.support.fault_counts import register
from tests.support.keyring_entries import holds_a_key
from vault import InvalidArgument, KeyUnavailable, Principal, Vault

ALICE = Principal("alice")
TEXT = "observation " * 500


def _unregister(cls):
    """keyring registers every concrete backend class for auto-detection: keep test classes out of it."""
    KeyringBackend._classes.discard(cls)
    return cls


@_unregister
class FaultyKeyring(MemoryKeyring):
    """A MemoryKeyring (sharing ``secrets``) that raises ``error()`` on the operations named in ``fail_on``;
    writes to services ending in ``drop`` are accepted and kept nowhere; a write to one ending in ``lost_reply``
    is stored, then reported as a D-Bus timeout once (the daemon did the write, its reply was lost)."""

    def __init__(self, secrets=None, fail_on=(), error=lambda: RuntimeError("backend down"), drop=None,
                 lost_reply=None):
        super().__init__()
        self.secrets = {} if secrets is None else secrets
        self.fail_on, self.error, self.drop, self.lost_reply = set(fail_on), error, drop, lost_reply
        self.was_armed, self.failed = bool(fail_on) or drop is not None or lost_reply is not None, 0
        register(self)  # the test fails if a fault armed here never fires

    def armed(self):
        return self.was_armed or bool(self.fail_on)

    def fired(self):
        return self.failed

    def _check(self, operation):
        self.was_armed |= bool(self.fail_on)
        if operation in self.fail_on:
            self.failed += 1
            raise self.error()

    def get_password(self, service, username):
        self._check("get")
        return super().get_password(service, username)

    def set_password(self, service, username, password):
        self._check("set")
        if self.drop is None or not service.endswith(self.drop):
            super().set_password(service, username, password)
        else:
            self.failed += 1
        if self.lost_reply is not None and service.endswith(self.lost_reply):
            self.lost_reply = None
            self.failed += 1
            raise TimeoutError("org.freedesktop.DBus.Error.NoReply")

    def delete_password(self, service, username):
        self._check("delete")
        super().delete_password(service, username)


DBusException = type("DBusException", (Exception,), {"__module__": "dbus.exceptions"})
ERRORS = {
    "locked": lambda: KeyringLocked("collection is locked"),
    "runtime": lambda: RuntimeError("backend down"),
    "dbus": lambda: DBusException("org.freedesktop.DBus.Error.ServiceUnknown"),
}


def key_strings(secrets):
    """Every form of key material in the keyring entries: the entries, their base64 keys, the keys in hex."""
    found = {value for value in secrets.values() if isinstance(value, str)}
    for key in re.findall(r"[A-Za-z0-9+/]{43}=", " ".join(found)):
        found |= {key, base64.b64decode(key).hex()}
    return found


def assert_remedy(error, *keyrings):
    message = str(error)
    assert isinstance(error, KeyUnavailable)
    assert "keyring" in message.lower()
    assert any(word in message for word in ("restore", "README", "gnome-keyring", "Secret Service")), message
    for kr in keyrings:
        for secret in key_strings(kr.secrets):
            assert secret not in message and secret not in repr(error)


def expect_unavailable(*attempts, keyrings=()):
    for attempt in attempts:
        with pytest.raises(KeyUnavailable) as caught:
            attempt()
        assert_remedy(caught.value, *keyrings)


def reopen(db_path, kr, clock, **settings):
    return Vault.open(db_path, keyring_backend=kr, clock=clock, **settings)


def entry(kr, kind):
    (name,) = [k for k in kr.secrets if k[0].endswith("/" + kind)] or [None]
    return name


@pytest.fixture
def filled(db_path, keyring_backend, clock):
    """A vault file holding two rows of alice's, closed; returns their ids."""
    with reopen(db_path, keyring_backend, clock) as v:
        return [v.put(ALICE, "t1", 1, "web", TEXT).id, v.put(ALICE, "t1", 2, "web", b"\x00\xff" * 999).id]


def assert_intact(db_path, keyring_backend, clock, ids):
    with reopen(db_path, keyring_backend, clock) as v:
        assert v.stats()["rows"] == 2
        assert [v.get(ALICE, i).content for i in ids] == [TEXT, b"\x00\xff" * 999]


# -- unacceptable backends: refused before anything is written ---------------------------------------
def fake_alt():
    cls = _unregister(type("PlaintextKeyring", (MemoryKeyring,), {"__module__": "keyrings.alt.file"}))
    return cls()


def chain_of(*children, priority=None):
    attrs = {"backends": list(children)} | ({} if priority is None else {"priority": priority})
    return _unregister(type("TestChainer", (chainer.ChainerBackend,), attrs))()


INSECURE = {
    "fail": lambda: fail.Keyring(),
    "null": lambda: null.Keyring(),
    "keyrings.alt": fake_alt,
    "chainer-with-alt": lambda: chain_of(MemoryKeyring(), fake_alt()),
    "chainer-with-null": lambda: chain_of(null.Keyring(), MemoryKeyring()),
    "drops-writes": lambda: FaultyKeyring(drop=""),
}


@pytest.mark.parametrize("make", INSECURE.values(), ids=INSECURE.keys())
def test_insecure_backend_refused_at_open_and_writes_nothing(make, db_path, attacker, keyring_backend):
    expect_unavailable(lambda: Vault.open(db_path, keyring_backend=make()))
    assert attacker.meta("vault_id") is None
    with Vault.open(db_path, keyring_backend=keyring_backend) as v:
        assert v.put(ALICE, "t", 1, "x", "ok").size_bytes == 2


def test_explicit_non_backend_is_invalid_argument_and_writes_nothing(db_path, attacker):
    with pytest.raises(InvalidArgument):
        Vault.open(db_path, keyring_backend=object())
    assert attacker.meta("vault_id") is None


def test_subclass_of_plaintext_backend_refused(db_path):
    subclass = _unregister(type("MyKeyring", (type(fake_alt()),), {"__module__": "mycompany.keyring"}))
    with pytest.raises(KeyUnavailable):
        Vault.open(db_path, keyring_backend=subclass())


def test_chainer_whose_backend_discovery_raises_is_key_unavailable(db_path):
    def boom(self):
        raise RuntimeError("plugin failed to load")

    broken = _unregister(type("BrokenChainer", (MemoryKeyring,), {"backends": property(boom)}))
    with pytest.raises(KeyUnavailable):
        Vault.open(db_path, keyring_backend=broken())


def with_priority(priority):
    return _unregister(type(f"Priority{priority}", (MemoryKeyring,), {"priority": priority}))()


def _raise():
    raise RuntimeError("keyring config failed to load")


AUTO = {
    "priority-0.5": lambda: with_priority(0.5),
    "priority-raises": MemoryKeyring,  # KeyringBackend.priority raises NotImplementedError
    "get_keyring-raises": _raise,
    "fail-backend": fail.Keyring,
    "not-a-backend": object,
    "chainer-with-alt": lambda: chain_of(with_priority(5), fake_alt(), priority=10),
}


@pytest.mark.parametrize("detected", AUTO.values(), ids=AUTO.keys())
def test_auto_detection_refuses_unrecommended_keyring(detected, monkeypatch, db_path, keyring_backend, filled,
                                                      attacker_for, location_named):
    monkeypatch.setattr(keyring, "get_keyring", detected)
    new = location_named("new.db")
    expect_unavailable(lambda: Vault.open(new), lambda: Vault.open(db_path), keyrings=[keyring_backend])
    assert attacker_for(new).meta("vault_id") is None
    monkeypatch.setattr(keyring, "get_keyring", lambda: with_priority(5))
    with Vault.open(new) as v:  # the positive control: a recommended backend is used
        assert v.stats()["keyring_backend"].endswith("Priority5")


# -- backend errors ----------------------------------------------------------------------------------
@pytest.mark.parametrize("error", ERRORS.values(), ids=ERRORS.keys())
def test_set_failure_creating_vault_leaves_no_vault_id(error, db_path, attacker):
    faulty = FaultyKeyring(fail_on={"set"}, error=error)
    expect_unavailable(lambda: Vault.open(db_path, keyring_backend=faulty))
    assert attacker.meta("vault_id") is None and faulty.secrets == {}
    faulty.fail_on.clear()
    with Vault.open(db_path, keyring_backend=faulty) as v:
        assert v.get(ALICE, v.put(ALICE, "t", 1, "x", "ok").id).content == "ok"


@pytest.mark.parametrize("error", ERRORS.values(), ids=ERRORS.keys())
def test_get_failure_at_open_is_key_unavailable(error, db_path, keyring_backend, clock, filled):
    faulty = FaultyKeyring(keyring_backend.secrets, {"get"}, error)
    expect_unavailable(lambda: reopen(db_path, faulty, clock), keyrings=[keyring_backend])
    assert_intact(db_path, keyring_backend, clock, filled)


@pytest.mark.parametrize("error", ERRORS.values(), ids=ERRORS.keys())
def test_get_failure_on_read_and_put_writes_nothing(error, db_path, keyring_backend, clock, filled):
    faulty = FaultyKeyring(keyring_backend.secrets, error=error)
    before = dict(keyring_backend.secrets)
    with reopen(db_path, faulty, clock) as v:
        faulty.fail_on.add("get")
        expect_unavailable(lambda: v.get(ALICE, filled[0]), lambda: v.read(ALICE, filled[1]),
                           lambda: v.list_for_turn(ALICE, "t1"), lambda: v.put(ALICE, "t1", 3, "x", "new"),
                           keyrings=[keyring_backend])
        assert v.stats()["rows"] == 2
    assert keyring_backend.secrets == before
    assert_intact(db_path, keyring_backend, clock, filled)


@pytest.mark.parametrize("error", ERRORS.values(), ids=ERRORS.keys())
def test_set_failure_for_new_owner_stores_no_row(error, db_path, attacker, keyring_backend, clock, filled):
    faulty = FaultyKeyring(keyring_backend.secrets, {"set"}, error)
    with reopen(db_path, faulty, clock) as v:
        expect_unavailable(lambda: v.put(Principal("bob"), "t1", 1, "x", "secret"), keyrings=[keyring_backend])
        assert v.stats()["rows"] == 2
        assert v.put(ALICE, "t1", 3, "x", "known owner needs no write").size_bytes > 0
    assert len(attacker.commitments()) == 1  # bob never got a key version, and the keyring no entry of his:
    assert len([name for name in keyring_backend.secrets if holds_a_key(name) and "/epoch-key" not in name[0]]) == 2


def test_keyring_that_drops_owner_keys_is_caught_at_first_put(db_path, attacker, clock):
    dropping = FaultyKeyring(drop="/owner-key")
    with reopen(db_path, dropping, clock) as v:
        # caught by the read-back at the first put, and never a fresh key silently made on a later one
        expect_unavailable(lambda: v.put(ALICE, "t", 1, "x", "lost?"), lambda: v.put(ALICE, "t", 2, "x", "lost?"))
        assert v.stats()["rows"] == 0 and v.list_for_turn(ALICE, "t") == []
    assert len(attacker.commitments()) == 0 and entry(dropping, "owner-key") is None


def test_key_written_despite_a_timeout_is_never_adopted_but_deleted(db_path, clock, attacker):
    """The keyring did the write but its reply was lost: that version's reservation is tombstoned, the next put
    makes the next version, and the orphan entry is deleted, never used."""
    kr = FaultyKeyring(lost_reply="/owner-key")
    with reopen(db_path, kr, clock) as v:
        with pytest.raises(KeyUnavailable):
            v.put(ALICE, "t", 1, "x", "first")
        assert next(user for service, user in kr.secrets if service.endswith("/owner-key")).endswith(".1")
        row = v.put(ALICE, "t", 2, "x", "second").id
        assert [user[-2:] for service, user in kr.secrets if service.endswith("/owner-key")] == [".2"]
        assert attacker.recorded_key_versions() == {"committed": [2], "tombstoned": [1]}
    name = entry(kr, "owner-key")
    kr.secrets[name] = json.dumps({"format": "scratchvault-key/1", "key": base64.b64encode(os.urandom(32)).decode()})
    with reopen(db_path, kr, clock) as v, pytest.raises(KeyUnavailable):
        v.get(ALICE, row)  # a swapped key must be detected, not look like a tampered file


# -- garbage, deleted and replaced entries -------------------------------------------------------------
def keyset(primary, keys):
    return json.dumps({"format": "scratchvault-keyset/1", "primary": primary, "keys": keys})


B64_32 = base64.b64encode(bytes(range(32))).decode()
GARBAGE = {
    "bad-json": "{not json",
    "wrong-format": json.dumps({"format": "scratchvault-keyset/2", "primary": 1, "keys": {"1": B64_32}}),
    "31-byte-key": keyset(1, {"1": base64.b64encode(bytes(31)).decode()}),
    "invalid-base64": keyset(1, {"1": "!!" + B64_32[2:]}),
    "primary-not-in-keys": keyset(2, {"1": B64_32}),
    "primary-bool": keyset(True, {"1": B64_32}),
    "no-keys": keyset(1, {}),
    "version-0": keyset(0, {"0": B64_32}),
    "not-a-dict": json.dumps([1, 2]),
    "non-str-value": b"\x01" * 32,
    "deeply-nested": "[" * 100_000,
    "single-31-byte-key": json.dumps({"format": "scratchvault-key/1", "key": base64.b64encode(bytes(31)).decode()}),
    "a-whole-keyset": keyset(1, {"1": B64_32}),
}


@pytest.mark.parametrize("garbage", GARBAGE.values(), ids=GARBAGE.keys())
def test_garbage_owner_entry_is_key_unavailable_and_kept(garbage, db_path, keyring_backend, clock, filled):
    name = entry(keyring_backend, "owner-key")
    good, keyring_backend.secrets[name] = keyring_backend.secrets[name], garbage
    with reopen(db_path, keyring_backend, clock) as v:
        expect_unavailable(lambda: v.get(ALICE, filled[0]), lambda: v.list_for_turn(ALICE, "t1"),
                           lambda: v.put(ALICE, "t1", 3, "x", "new"), keyrings=[keyring_backend])
        assert v.stats()["rows"] == 2
    assert keyring_backend.secrets[name] == garbage  # never overwritten by a fresh key
    keyring_backend.secrets[name] = good
    assert_intact(db_path, keyring_backend, clock, filled)


def test_a_garbled_owner_key_entry_says_which_entry_and_the_remedy(db_path, keyring_backend, clock, filled):
    keyring_backend.secrets[entry(keyring_backend, "owner-key")] = "not json"
    with reopen(db_path, keyring_backend, clock) as v, pytest.raises(
            KeyUnavailable, match=r"^the keyring entry for the owner key is malformed; restore it from the keyring "
                                  r"backup$"):
        v.get(ALICE, filled[0])


@pytest.mark.parametrize("garbage", ["{", json.dumps({"format": "scratchvault-key/1", "key": B64_32[:-4]}), 7])
def test_garbage_index_entry_is_key_unavailable_at_open(garbage, db_path, keyring_backend, clock, filled):
    name = entry(keyring_backend, "index")
    good, keyring_backend.secrets[name] = keyring_backend.secrets[name], garbage
    expect_unavailable(lambda: reopen(db_path, keyring_backend, clock), keyrings=[keyring_backend])
    keyring_backend.secrets[name] = good
    assert_intact(db_path, keyring_backend, clock, filled)


def test_garbage_detected_on_next_cache_miss_in_a_live_vault(db_path, keyring_backend, clock):
    with reopen(db_path, keyring_backend, clock, key_cache_seconds=1e-6) as v:
        row = v.put(ALICE, "t", 1, "x", TEXT).id
        name = entry(keyring_backend, "owner-key")
        good, keyring_backend.secrets[name] = keyring_backend.secrets[name], GARBAGE["31-byte-key"]
        expect_unavailable(lambda: v.get(ALICE, row), keyrings=[keyring_backend])
        keyring_backend.secrets[name] = good
        assert v.get(ALICE, row).content == TEXT


def test_deleted_owner_keyset_never_replaced_by_a_new_key(db_path, keyring_backend, clock, filled):
    name = entry(keyring_backend, "owner-key")
    good = keyring_backend.secrets.pop(name)
    with reopen(db_path, keyring_backend, clock) as v:
        expect_unavailable(lambda: v.get(ALICE, filled[0]), lambda: v.list_for_turn(ALICE, "t1"),
                           lambda: v.put(ALICE, "t1", 3, "x", "new"), lambda: v.put(ALICE, "t9", 1, "x", "new"),
                           keyrings=[keyring_backend])
        assert v.stats()["rows"] == 2
    assert name not in keyring_backend.secrets
    keyring_backend.secrets[name] = good
    assert_intact(db_path, keyring_backend, clock, filled)


def test_owner_without_rows_but_with_commitment_gets_no_new_key(db_path, keyring_backend, clock, filled):
    with reopen(db_path, keyring_backend, clock) as v:
        for row in filled:
            v.delete(ALICE, row)
    del keyring_backend.secrets[entry(keyring_backend, "owner-key")]
    with reopen(db_path, keyring_backend, clock) as v:
        expect_unavailable(lambda: v.put(ALICE, "t1", 3, "x", "new"), keyrings=[keyring_backend])
        assert v.stats()["rows"] == 0
    assert entry(keyring_backend, "owner-key") is None


@pytest.mark.parametrize("replacement", [
    json.dumps({"format": "scratchvault-key/1", "key": B64_32}),
    keyset(1, {"1": B64_32}),
], ids=["other-key", "old-layout"])
def test_replaced_owner_keyset_is_key_unavailable(replacement, db_path, keyring_backend, clock, filled):
    name = entry(keyring_backend, "owner-key")
    good, keyring_backend.secrets[name] = keyring_backend.secrets[name], replacement
    with reopen(db_path, keyring_backend, clock) as v:
        expect_unavailable(lambda: v.get(ALICE, filled[0]), lambda: v.read(ALICE, filled[1]),  # not Integrity/NotFound
                           lambda: v.put(ALICE, "t1", 3, "x", "new"), keyrings=[keyring_backend])
        assert v.stats()["rows"] == 2 and v.stats()["counters"]["integrity_failures"] == 0
    keyring_backend.secrets[name] = good
    assert_intact(db_path, keyring_backend, clock, filled)


def test_deleted_index_key_is_key_unavailable_at_open_and_not_recreated(db_path, keyring_backend, clock, filled):
    name = entry(keyring_backend, "index")
    good = keyring_backend.secrets.pop(name)
    expect_unavailable(lambda: reopen(db_path, keyring_backend, clock), keyrings=[keyring_backend])
    assert name not in keyring_backend.secrets
    keyring_backend.secrets[name] = good
    assert_intact(db_path, keyring_backend, clock, filled)


def test_replaced_index_key_is_key_unavailable_not_empty_vault(db_path, keyring_backend, clock, filled):
    name = entry(keyring_backend, "index")
    keyring_backend.secrets[name] = json.dumps({"format": "scratchvault-key/1", "key": B64_32})
    with pytest.raises(KeyUnavailable):
        with reopen(db_path, keyring_backend, clock) as v:
            v.list_for_turn(ALICE, "t1")


# -- the key cache -----------------------------------------------------------------------------------
def test_key_cache_bounds_keyring_reads_and_is_cleared_on_close(db_path, keyring_backend, clock):
    with reopen(db_path, keyring_backend, clock) as v:
        ids = [v.put(ALICE, "t", 0, "x", "warm-up").id]
        warm = keyring_backend.reads
        for i in range(1, 200):
            if i % 3 == 0:
                assert v.read(ALICE, ids[(i * 7) % len(ids)], mode="full").returned_size > 0
            elif i % 3 == 1:
                ids.append(v.put(ALICE, "t", i, "x", f"row {i}").id)
            else:
                assert v.list_for_turn(ALICE, "t")[0].id == ids[0]
        assert keyring_backend.reads - warm <= 3
    closed = keyring_backend.reads
    with reopen(db_path, keyring_backend, clock) as v:
        assert keyring_backend.reads > closed  # the index key is fetched again
        opened = keyring_backend.reads
        assert v.get(ALICE, ids[-1]).content == "row 199"
        assert keyring_backend.reads > opened  # and the owner keyset too
