"""The keyring's owner marks (keys/keyring/owner_marks.py) on a MemoryKeyring: each kind in its own entry, only ever
raised, a garbled entry read as 0; a raise read back as at least what was written; and the one-time adoption of the
database's versions into the ``issued`` marks, remembered in the keyring."""

from __future__ import annotations

import pytest

from keys.errors import KeyUnavailable
from keys.keyring.edge import KeyringEdge
from keys.keyring.entries import MAX_VERSION
from keys.keyring.owner_marks import ALWAYS_PROBED, OwnerMarks, owner_mark_value
from keys.keyring.secret import Secret
from keys.testing import MemoryKeyring

VAULT_ID = bytes(16)
OWNER = b"o" * 32


def edge(ring: MemoryKeyring | None = None) -> KeyringEdge:
    return KeyringEdge(ring or MemoryKeyring(), timeout=5)


def test_owner_marks_are_raised_never_lowered_each_kind_apart_and_garbled_reads_as_zero():
    ring = MemoryKeyring()
    marks = OwnerMarks(edge(ring), VAULT_ID)
    marks.raise_to("issued", OWNER, 20)
    marks.raise_to("issued", OWNER, 17)
    assert (marks.read("issued", OWNER), marks.read("retired", OWNER)) == (20, 0)
    ring.secrets[("scratchvault/" + VAULT_ID.hex() + "/owner-retired", OWNER.hex())] = "2147483648"
    assert marks.read("retired", OWNER) == 0
    edge(ring).set("x", "y", Secret("z"))  # an unrelated entry changes nothing
    assert marks.read("issued", OWNER) == 20


@pytest.mark.parametrize(("text", "value"), [("0", 0), ("1", 1), ("0000000020", 20), (str(MAX_VERSION), MAX_VERSION)])
def test_an_owner_mark_is_any_decimal_of_at_most_ten_digits_up_to_the_highest_version(text, value):
    assert owner_mark_value(text) == value


@pytest.mark.parametrize("text", ["", "abc", "-1", "1.5", " 7", "\u0661", "0" * 10 + "1", str(MAX_VERSION + 1)])
def test_anything_else_is_no_owner_mark(text):
    assert owner_mark_value(text) is None


class CountingKeyring(MemoryKeyring):
    """The in-memory keyring, counting the writes it is asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def set_password(self, service: str, username: str, password: str) -> None:
        self.writes += 1
        super().set_password(service, username, password)


def test_an_owner_mark_already_as_high_is_not_written_again():
    ring = CountingKeyring()
    marks = OwnerMarks(edge(ring), VAULT_ID)
    marks.raise_to("issued", OWNER, 20)
    marks.raise_to("issued", OWNER, 20)
    marks.raise_to("issued", OWNER, 19)
    assert ring.writes == 1 and marks.read("issued", OWNER) == 20


class RacedKeyring(MemoryKeyring):
    """Another process raises every mark written here by ``ahead`` before it is read back."""

    def __init__(self, ahead: int) -> None:
        super().__init__()
        self.ahead = ahead

    def set_password(self, service: str, username: str, password: str) -> None:
        super().set_password(service, username, str(int(password) + self.ahead).zfill(10))


@pytest.mark.parametrize("ahead", [0, 5])  # 0: the same number, spelt as this keyring keeps it (ten digits)
def test_an_owner_mark_read_back_at_least_as_high_as_written_keeps_the_promise(ahead):
    marks = OwnerMarks(edge(RacedKeyring(ahead)), VAULT_ID)
    marks.raise_to("retired", OWNER, 20)
    assert marks.read("retired", OWNER) == 20 + ahead


def test_an_owner_mark_that_does_not_read_back_as_raised_is_key_unavailable_saying_what_and_the_remedy():
    marks = OwnerMarks(edge(), VAULT_ID)
    with pytest.raises(KeyUnavailable, match=r"^the OS keyring did not keep a key version mark it was given; "
                                             r"check the keyring and retry$"):
        marks.raise_to("retired", OWNER, 2**31)  # past any version: it reads back as no mark


def test_adoption_raises_the_issued_mark_of_each_owner_past_the_always_probed_versions_then_is_recorded():
    ring = MemoryKeyring()
    marks = OwnerMarks(edge(ring), VAULT_ID)
    assert not marks.adopted()
    tops = [(b"a" * 32, ALWAYS_PROBED), (b"b" * 32, ALWAYS_PROBED + 1), (b"c" * 32, MAX_VERSION),
            (b"d" * 32, MAX_VERSION + 1)]  # the last is past any version: no mark holds it
    marks.adopt(tops)
    assert [marks.read("issued", owner) for owner, _ in tops] == [0, ALWAYS_PROBED + 1, MAX_VERSION, 0]
    assert marks.read("retired", b"b" * 32) == marks.read("swept", b"b" * 32) == 0
    assert OwnerMarks(edge(ring), VAULT_ID).adopted() and not OwnerMarks(edge(ring), bytes(range(16))).adopted()


def test_adoption_is_asked_of_the_keyring_until_it_is_seen_then_never_again():
    ring = MemoryKeyring()
    marks, other_process = OwnerMarks(edge(ring), VAULT_ID), OwnerMarks(edge(ring), VAULT_ID)
    before = ring.reads
    assert not marks.adopted() and not marks.adopted()
    assert ring.reads - before == 2  # another process may adopt meanwhile
    other_process.adopt([])
    before = ring.reads
    assert marks.adopted() and marks.adopted() and other_process.adopted()
    assert ring.reads - before == 1  # once seen, or once done, it stays so: the entry is never deleted


def test_owner_marks_show_no_vault_or_owner():
    assert repr(OwnerMarks(edge(), bytes(range(16)))) == "<OwnerMarks>"
