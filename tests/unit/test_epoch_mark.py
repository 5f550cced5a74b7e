"""An epoch mark (keys/epochs/marks.py) on an in-memory keyring that counts reads and writes: which texts read as a
number (every width up to 19 digits, nothing past 2**63 - 1), what the process remembers of a mark (the highest value
it read or wrote, never lowered by a later read, and asked of the keyring again only above it), and when a raise
is kept: a value already held is not written again, and the read-back after a write accepts another writer's mark
only when it holds at least as much. A raise reported kept when the keyring holds less would let a restored backup
read a destroyed epoch's rows as a missing key, not as gone.
"""

from __future__ import annotations

import pytest

from keys.epochs.marks import EpochMark, epoch_mark_value, marker_name
from keys.keyring.edge import KeyringEdge
from keys.testing import MemoryKeyring

E = 3600
SERVICE = "scratchvault/00/epoch-key"
MARK = (SERVICE, marker_name(E))
NOTHING_LANDS = object()  # no other writer: the keyring keeps what was written


class CountingKeyring(MemoryKeyring):
    """The in-memory keyring counting writes too; ``landing`` is what another writer leaves in the entry right
    after each write, before the read-back (its text, None for a delete, NOTHING_LANDS)."""

    def __init__(self, landing: object = NOTHING_LANDS) -> None:
        super().__init__()
        self.landing, self.writes = landing, 0

    def set_password(self, service: str, username: str, password: str) -> None:
        self.writes += 1
        super().set_password(service, username, password)
        if self.landing is None:
            del self.secrets[(service, username)]
        elif isinstance(self.landing, str):
            self.secrets[(service, username)] = self.landing


def marks_on(ring: CountingKeyring, marker: int | None = None) -> EpochMark:
    if marker is not None:
        ring.secrets[MARK] = str(marker)
    return EpochMark(KeyringEdge(ring, timeout=5), SERVICE)


@pytest.mark.parametrize(("text", "value"), [
    ("0", 0), ("7", 7), ("1" + "0" * 18, 10**18), (str(2**63 - 1), 2**63 - 1),
    ("", None), (str(2**63), None), ("0" * 20, None), (" 7", None), ("+7", None),
])
def test_a_mark_is_plain_decimal_of_up_to_nineteen_digits_below_two_to_the_sixty_three(text, value):
    assert epoch_mark_value(text) == value


def test_a_mark_read_is_remembered_and_covers_its_epochs_without_asking_again():
    ring = CountingKeyring()
    marks = marks_on(ring, marker=10)
    assert marks.known(E) is None and marks.covers(E, 10) and ring.reads == 1
    assert marks.known(E) == 10 and marks.covers(E, 10) and marks.covers(E, 0) and ring.reads == 1


def test_an_epoch_past_the_remembered_mark_is_asked_of_the_keyring_each_time():
    ring = CountingKeyring()
    marks = marks_on(ring, marker=10)
    assert marks.read(E) == 10 and ring.reads == 1
    assert not marks.covers(E, 11) and ring.reads == 2
    ring.secrets[MARK] = "11"  # another process destroyed epoch 11 meanwhile
    assert marks.covers(E, 11) and ring.reads == 3 and marks.known(E) == 11


def test_a_mark_raised_by_this_process_covers_its_epochs_without_any_read():
    ring = CountingKeyring()
    marks = marks_on(ring)
    assert marks.raise_to(E, 10) and ring.writes == 1
    ring.reads = 0
    assert marks.covers(E, 10) and marks.covers(E, 3) and ring.reads == 0


def test_a_lower_mark_read_later_does_not_lower_what_the_process_remembers():
    ring = CountingKeyring()
    marks = marks_on(ring)
    assert marks.raise_to(E, 10)
    ring.secrets[MARK] = "4"  # a plain keyring's concurrent writer holding less lowered it
    assert marks.read(E) == 4 and marks.known(E) == 10
    assert marks.known(60) is None  # each length is remembered on its own


@pytest.mark.parametrize("held", [10, 11])
def test_a_raise_to_what_the_keyring_already_holds_reads_once_and_writes_nothing(held):
    ring = CountingKeyring()
    assert marks_on(ring, marker=held).raise_to(E, 10)
    assert (ring.reads, ring.writes, ring.secrets[MARK]) == (1, 0, str(held))


def test_a_raise_past_the_mark_writes_it_once_and_reads_it_back():
    ring = CountingKeyring()
    marks = marks_on(ring, marker=9)
    assert marks.raise_to(E, 10) and marks.known(E) == 10
    assert (ring.reads, ring.writes, ring.secrets[MARK]) == (2, 1, "10")


@pytest.mark.parametrize(("landing", "value", "kept"), [
    ("12", 10, True),  # another writer raised it higher: the promise "at least 10" holds
    ("010", 10, True),  # the same number in another text
    ("9", 10, False),  # another writer held less and lowered it
    (None, 10, False),  # deleted before the read-back
    ("not a number", 1, False),  # garbled: no mark, so not at least 1
])
def test_a_mark_read_back_other_than_written_is_kept_only_when_it_holds_at_least_the_value(landing, value, kept):
    ring = CountingKeyring(landing)
    marks = marks_on(ring)
    assert marks.raise_to(E, value) is kept
    assert ring.writes == 1 and marks.known(E) == (value if kept else None)


def test_an_epoch_marks_repr_shows_nothing_of_its_keyring_or_service():
    assert repr(marks_on(CountingKeyring())) == "<EpochMark>"
