"""What the keyring edge (keys/keyring/edge.py) says when a backend fails: a KeyUnavailable naming the operation and
the kind of failure, with the remedy; a backend of this project that already raises KeyUnavailable keeps its own
text (and remedy). Never the backend's own message, which may name the entry."""

from __future__ import annotations

import re

import pytest
from keyring.errors import NoKeyringError

from keys.errors import KeyUnavailable
from keys.keyring.edge import REMEDY, KeyringEdge
from keys.keyring.secret import Secret
from keys.testing import MemoryKeyring
from tests.support.fault_counts import FaultDouble, Switch


class RaisingKeyring(MemoryKeyring, FaultDouble):
    """The in-memory keyring; while ``error`` is set, every call raises it (and counts the failure)."""

    error = Switch()

    def _fail(self) -> None:
        if self.error:
            self.failed()
            raise self.error

    def get_password(self, service: str, username: str) -> str | None:
        self._fail()
        return super().get_password(service, username)

    def set_password(self, service: str, username: str, password: str) -> None:
        self._fail()
        super().set_password(service, username, password)

    def delete_password(self, service: str, username: str) -> None:
        self._fail()
        super().delete_password(service, username)


def failing_with(error: Exception) -> KeyringEdge:
    ring = RaisingKeyring()
    ring.error = error
    return KeyringEdge(ring, timeout=5)


def exactly(text: str) -> str:
    return f"^{re.escape(text)}$"


def test_a_backend_failure_names_the_operation_and_the_error_kind_never_its_message():
    with pytest.raises(KeyUnavailable, match=exactly(f"the OS keyring failed to delete a key (OSError); {REMEDY}")):
        failing_with(OSError("entry alice.1 is busy")).delete("service", "alice.1")
    with pytest.raises(KeyUnavailable, match=exactly(f"the OS keyring failed to read a key (ValueError); {REMEDY}")):
        failing_with(ValueError("entry alice.1")).get("service", "alice.1")
    with pytest.raises(KeyUnavailable, match=exactly(f"the OS keyring failed to write a key (KeyError); {REMEDY}")):
        failing_with(KeyError("alice.1")).set("service", "alice.1", Secret("key"))


def test_no_keyring_at_all_says_so_with_the_remedy():
    with pytest.raises(KeyUnavailable, match=exactly(f"no OS keyring is available; {REMEDY}")):
        failing_with(NoKeyringError("none")).get("service", "user")


def test_a_backend_of_this_project_keeps_its_own_text_and_remedy():
    own = "the OpenBao server is sealed; unseal it and retry"
    with pytest.raises(KeyUnavailable, match=exactly(own)):
        failing_with(KeyUnavailable(own)).get("service", "user")
