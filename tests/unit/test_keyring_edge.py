"""The keyring edge (keys/keyring/edge.py) on the in-memory keyring: which backends it takes (and what it says when it
refuses one), how it runs a call, and a write read back and compared (keys/keyring/secret.py) before it counts as
stored."""

from __future__ import annotations

import re
import threading
import warnings

import keyring
import pytest
from keyring.backend import KeyringBackend
from keyring.backends import null

from keys.errors import InvalidArgument, KeyUnavailable
from keys.keyring import memory
from keys.keyring.edge import REMEDY, KeyringEdge, resolve_backend
from keys.keyring.secret import Secret
from keys.testing import MemoryKeyring

LONE_SURROGATES = ("\ud800", "\udfff")  # text a backend can hand back that no UTF-8 encoder accepts as it is
TAKES = 'keyring_backend must be a keyring.backend.KeyringBackend instance, or "memory" for a trial keyring'


def exactly(text: str) -> str:
    return f"^{re.escape(text)}$"


def unregistered(cls: type[KeyringBackend]) -> type[KeyringBackend]:
    """keyring registers every backend class for its own auto-selection: keep the test's classes out of it."""
    KeyringBackend._classes.discard(cls)  # type: ignore[attr-defined]  # keyring's registry, not in its stubs
    return cls


@unregistered
class BarelyRecommended(MemoryKeyring):
    priority = 1


@unregistered
class NotRecommended(MemoryKeyring):
    priority = 0.99


@unregistered
class ChainingNull(MemoryKeyring):
    """A chainer whose second backend stores nothing."""

    @property
    def backends(self) -> list[KeyringBackend]:
        return [MemoryKeyring(), null.Keyring()]


@unregistered
class BrokenChainer(MemoryKeyring):
    @property
    def backends(self) -> list[KeyringBackend]:
        raise RuntimeError("a plug-in of /home/alice failed to load")


@pytest.mark.parametrize("given", ["Memory", "keyring.backends.SecretService.Keyring", object(), 10])
def test_anything_but_a_backend_or_the_trial_keyring_name_is_invalid_argument_saying_what_is_taken(given):
    with pytest.raises(InvalidArgument, match=exactly(TAKES)):
        resolve_backend(given)


def test_the_trial_keyring_name_gives_this_processs_trial_keyring_without_a_warning_of_its_own():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Vault.open warns, naming its caller's line; the edge does not
        assert resolve_backend("memory") is memory.trial_keyring()


def test_a_keyring_that_cannot_be_loaded_says_the_kind_of_error_never_its_text(monkeypatch):
    def unloadable() -> KeyringBackend:
        raise RuntimeError("the config at /home/alice/.config is broken")

    monkeypatch.setattr(keyring, "get_keyring", unloadable)
    with pytest.raises(KeyUnavailable, match=exactly(f"the OS keyring could not be loaded (RuntimeError); {REMEDY}")):
        resolve_backend(None)


@pytest.mark.parametrize("backend", [null.Keyring, ChainingNull], ids=["alone", "chained"])
def test_a_backend_that_stores_nothing_is_refused_by_its_name_alone_or_chained(backend):
    refusal = f"keyring backend keyring.backends.null.Keyring stores no secrets or stores them in plaintext; {REMEDY}"
    with pytest.raises(KeyUnavailable, match=exactly(refusal)):
        resolve_backend(backend())


def test_a_chainer_that_cannot_list_its_backends_says_so_never_why():
    refusal = f"the keyring backend could not list the backends it chains; {REMEDY}"
    with pytest.raises(KeyUnavailable, match=exactly(refusal)):
        resolve_backend(BrokenChainer())


def test_keyring_s_choice_is_taken_from_priority_one_and_refused_below_naming_it(monkeypatch):
    chosen = BarelyRecommended()
    monkeypatch.setattr(keyring, "get_keyring", lambda: chosen)
    assert resolve_backend(None) is chosen
    monkeypatch.setattr(keyring, "get_keyring", NotRecommended)
    refusal = f"no recommended OS keyring is available (found {__name__}.NotRecommended); {REMEDY}"
    with pytest.raises(KeyUnavailable, match=exactly(refusal)):
        resolve_backend(None)


def test_an_edge_waits_ten_seconds_for_a_call_unless_told_otherwise():
    assert KeyringEdge(MemoryKeyring()).timeout == 10  # the keyring_timeout a vault opens with by default (README)


class ThreadRecordingKeyring(MemoryKeyring):
    def __init__(self) -> None:
        super().__init__()
        self.threads: list[threading.Thread] = []

    def get_password(self, service: str, username: str) -> str | None:
        self.threads.append(threading.current_thread())
        return super().get_password(service, username)


def test_a_keyring_call_runs_in_a_named_daemon_thread_so_a_hung_one_is_recognisable_and_never_blocks_exit():
    ring = ThreadRecordingKeyring()
    KeyringEdge(ring, timeout=5).get("service", "user")
    (thread,) = ring.threads
    assert thread is not threading.current_thread()
    assert (thread.name, thread.daemon) == ("scratchvault-keyring", True)


class HeldWrites(MemoryKeyring):
    """Holds each write until ``release`` is set; remembers the thread running it."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.worker: threading.Thread | None = None

    def set_password(self, service: str, username: str, password: str) -> None:
        self.worker = threading.current_thread()
        self.release.wait(5)
        super().set_password(service, username, password)


class WriteLandsBeforeItIsRecorded:
    """The edge's lock, except that the second time the caller's thread takes it (to record its timed-out write as
    unfinished) the held write first lands and its thread ends: the narrowest order of a late write."""

    def __init__(self, lock: threading.Lock, ring: HeldWrites) -> None:
        self.lock, self.ring, self.caller, self.taken = lock, ring, threading.get_ident(), 0

    def __enter__(self) -> bool:
        if threading.get_ident() == self.caller:
            self.taken += 1
            if self.taken == 2 and self.ring.worker is not None:
                self.ring.release.set()
                self.ring.worker.join(5)
        return self.lock.__enter__()

    def __exit__(self, *exc: object) -> None:
        self.lock.__exit__(*exc)


def test_a_write_that_times_out_but_lands_before_it_is_recorded_blocks_no_later_write():
    ring = HeldWrites()
    keyring_edge = KeyringEdge(ring, timeout=0.05)
    keyring_edge._lock = WriteLandsBeforeItIsRecorded(keyring_edge._lock, ring)  # type: ignore[assignment]  # the order forced
    with pytest.raises(KeyUnavailable, match=exactly(f"the OS keyring did not answer within 0.05 s (write); {REMEDY}")):
        keyring_edge.set("service", "user", Secret("first"))
    assert ring.secrets == {("service", "user"): "first"}
    keyring_edge.set("service", "user", Secret("second"))
    assert ring.secrets == {("service", "user"): "second"}


def test_entries_that_are_not_valid_utf8_compare_without_raising_equal_only_to_the_same_text():
    high, low = LONE_SURROGATES
    assert Secret(high) == Secret(high) and Secret("k" + low) == Secret("k" + low)
    assert Secret(high) != Secret(low) and Secret("k") != Secret(low) and Secret(high) != Secret("k")


def test_an_entry_holding_a_lone_surrogate_is_written_and_read_back_as_kept():
    ring = MemoryKeyring()
    for text in LONE_SURROGATES:
        KeyringEdge(ring, timeout=5).set("service", "user", Secret(text))
        assert ring.secrets[("service", "user")] == text
