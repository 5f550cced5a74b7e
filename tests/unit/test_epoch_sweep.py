"""The probe for keyring entries of ended expiry epochs that the database no longer lists (keys/epochs/sweep.py,
``EpochSweeper.probe``; threat_model.md, "Expiry epochs"), on a MemoryKeyring that records each name it is asked for
and a small double of the epoch records: every boundary of what it probes (the marker at, one below and far below
the target; the probed-through cursor ahead of the marker; ``until``; PROBE_BATCH; no marker at all, with and without
an oldest epoch; a keyring fault in the middle), each with the exact names asked, what was found and closed, and
the last new epoch probed. An epoch skipped, or a probe stopped early, leaves a key that should have been destroyed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from keys.epochs.marks import MARKER, PROBED, EpochMark, marker_name
from keys.epochs.sweep import MAX_ATTEMPTS, MAX_LIFETIME_SECONDS, PROBE_BATCH, Attempt, EpochSweeper
from keys.errors import IntegrityError
from keys.keyring.edge import KeyringEdge
from tests.support.epoch_key_making import WatchedKeyring

E, SKEW = 3600, 300
SERVICE = "scratchvault/00/epoch-key"
MARK, CURSOR = marker_name(E, MARKER), marker_name(E, PROBED)


class Records:
    """The epoch records the sweeper reads and writes, as a test sets them: tombstones (length, epoch, attempt,
    swept), the oldest epoch listed by length, the recorded attempt by epoch (or the error its malformed row
    raises); it keeps what ``close_found`` and ``mark_epochs_swept`` received and counts tombstone listings."""

    def __init__(self, tombstones: tuple[tuple[int, int, int, bool], ...] = (), oldest: int | None = None,
                 recorded: dict[tuple[int, int], int | Exception] | None = None) -> None:
        self.tombstones, self.oldest, self.recorded = list(tombstones), oldest, recorded or {}
        self.closed: list[list[Attempt]] = []
        self.swept: list[list[Attempt]] = []
        self.listings = 0

    def epoch_tombstones(self, unswept_only: bool) -> list[tuple[int, int, int, bool]]:
        self.listings += 1
        return [row for row in self.tombstones if not (unswept_only and row[3])]

    def oldest_epoch(self, length: int) -> int | None:
        return self.oldest if length == E else None

    def close_found(self, attempts: list[Attempt]) -> None:
        self.closed.append(list(attempts))

    def mark_epochs_swept(self, attempts: list[Attempt]) -> None:
        self.swept.append(list(attempts))

    def recorded_attempt(self, length: int, epoch: int) -> int | None:
        value = self.recorded.get((length, epoch))
        if isinstance(value, Exception):
            raise value
        return value


@dataclass
class Scene:
    """A sweeper over a watched keyring holding ``entries`` (user names) and the markers given, and its records."""

    records: Records = field(default_factory=Records)
    ring: WatchedKeyring = field(default_factory=WatchedKeyring)

    def __post_init__(self) -> None:
        edge = KeyringEdge(self.ring, timeout=5)
        self.marks, self.probed = EpochMark(edge, SERVICE), EpochMark(edge, SERVICE, PROBED)
        self.sweeper = EpochSweeper(edge, self.records, SERVICE, SKEW)

    def hold(self, *names: str, marker: int | None = None, cursor: int | None = None) -> Scene:
        for name in names:
            self.ring.secrets[(SERVICE, name)] = "an entry"  # the probe only asks whether a name is there
        for name, value in ((MARK, marker), (CURSOR, cursor)):
            if value is not None:
                self.ring.secrets[(SERVICE, name)] = str(value)
        return self

    def probe(self, target: int, until: int | None = None) -> tuple[list[Attempt], int | None]:
        return self.sweeper.probe(ending(target), E, self.marks, self.probed, until)


def ending(target: int) -> float:
    """The first time at which ``target`` is the last epoch whose key may be destroyed (its end plus the skew)."""
    return (target + 1) * E + SKEW


def names(epochs: range | list[int]) -> list[str]:
    """The names a probe asks for, in order: attempts 1 to 8 of each epoch."""
    return [f"{E}.{epoch}.{attempt}" for epoch in epochs for attempt in range(1, 9)]


def test_a_marker_at_the_target_ends_the_probe_after_one_read_of_it():
    scene = Scene().hold(f"{E}.10.1", marker=10, cursor=20)
    assert scene.probe(10) == ([], None)
    assert scene.ring.asked == [MARK] and scene.records.listings == 0 and scene.records.closed == []


def test_a_marker_this_process_raised_to_the_target_is_not_read_again():
    scene = Scene()
    assert scene.marks.raise_to(E, 10)
    scene.ring.asked.clear()
    assert scene.probe(10) == ([], None) and scene.ring.asked == []


def test_a_marker_this_process_saw_below_the_target_is_read_again_from_the_keyring():
    scene = Scene().hold(marker=3)
    assert scene.marks.read(E) == 3
    scene.hold(f"{E}.4.1", marker=10)  # another process destroyed through the target meanwhile
    scene.ring.asked.clear()
    assert scene.probe(10) == ([], None) and scene.ring.asked == [MARK]


def test_a_marker_one_below_the_target_probes_that_epoch_alone_without_reading_the_cursor():
    scene = Scene().hold(f"{E}.10.2", marker=9, cursor=10)
    assert scene.probe(10) == ([(E, 10, 2)], 10)
    assert scene.ring.asked == [MARK, *names([10])] and scene.records.closed == [[(E, 10, 2)]]


def test_a_marker_two_below_the_target_reads_the_cursor_and_probes_both_epochs():
    scene = Scene().hold(marker=8)
    assert scene.probe(10) == ([], 10)
    assert scene.ring.asked == [MARK, CURSOR, *names([9, 10])] and scene.records.closed == [[]]


def test_a_cursor_ahead_of_the_marker_probes_the_gap_again_then_the_epochs_past_the_cursor():
    # a delete stuck at epoch 3 holds the marker at 2; the cursor went on to 8
    scene = Scene().hold(f"{E}.3.1", f"{E}.8.8", f"{E}.10.4", marker=2, cursor=8)
    assert scene.probe(10) == ([(E, 3, 1), (E, 8, 8), (E, 10, 4)], 10)
    assert scene.ring.asked == [MARK, CURSOR, *names(range(3, 11))]
    assert scene.records.closed == [[(E, 3, 1), (E, 8, 8), (E, 10, 4)]]


def test_a_cursor_at_the_target_probes_the_gap_alone_and_reports_no_new_epoch_probed():
    scene = Scene().hold(f"{E}.5.1", marker=2, cursor=10)
    found, probed_to = scene.probe(10)
    assert found == [(E, 5, 1)] and probed_to is None
    assert scene.ring.asked == [MARK, CURSOR, *names(range(3, 11))] and scene.records.closed == [[(E, 5, 1)]]


def test_the_gap_is_at_most_a_batch_and_never_holds_back_the_epochs_past_the_cursor():
    scene = Scene().hold(f"{E}.50.1", f"{E}.51.1", f"{E}.61.1", marker=2, cursor=60)
    assert scene.probe(100) == ([(E, 50, 1), (E, 61, 1)], 100)
    assert scene.ring.asked == [MARK, CURSOR, *names(range(3, 3 + PROBE_BATCH)), *names(range(61, 101))]


def test_a_probe_past_the_batch_goes_on_from_the_marker_next_time():
    scene = Scene().hold(f"{E}.48.8", f"{E}.49.1", marker=0)
    assert PROBE_BATCH == 48
    assert scene.probe(100) == ([(E, 48, 8)], 48)
    assert scene.ring.asked == [MARK, CURSOR, *names(range(1, 49))]
    scene.hold(marker=48)  # what the destruction raises it to, nothing being stuck
    scene.ring.asked.clear()
    assert scene.probe(100) == ([(E, 49, 1)], 96)
    assert scene.ring.asked == [MARK, CURSOR, *names(range(49, 97))]


def test_without_a_marker_or_any_epoch_listed_nothing_is_asked_but_the_markers():
    scene = Scene().hold(f"{E}.0.1", f"{E}.1.1")
    assert scene.probe(10) == ([], None)
    assert scene.ring.asked == [MARK, CURSOR] and scene.records.listings == 0 and scene.records.closed == []


def test_without_a_marker_the_probe_starts_at_the_oldest_listed_epoch_even_epoch_zero():
    scene = Scene(Records(oldest=0)).hold(f"{E}.0.1", f"{E}.5.8")
    assert scene.probe(5) == ([(E, 0, 1), (E, 5, 8)], 5)
    assert scene.ring.asked == [MARK, CURSOR, *names(range(6))]


@pytest.mark.parametrize(("oldest", "first"), [(0, 79), (78, 79), (79, 79), (80, 80), (790, 790)])
def test_without_a_marker_the_probe_looks_back_no_further_than_the_longest_row_lifetime(oldest, first):
    assert MAX_LIFETIME_SECONDS // E == 720  # epoch 800's rows were put after epoch 79 began
    scene = Scene(Records(oldest=oldest)).hold(f"{E}.78.1", f"{E}.79.1", f"{E}.80.1")
    last = min(800, first + PROBE_BATCH - 1)
    assert scene.probe(800) == ([(E, epoch, 1) for epoch in (79, 80) if epoch >= first], last)
    assert scene.ring.asked == [MARK, CURSOR, *names(range(first, last + 1))]


def test_without_a_marker_a_cursor_left_by_an_earlier_probe_is_where_it_goes_on():
    scene = Scene(Records(oldest=0)).hold(f"{E}.5.1", f"{E}.6.1", cursor=5)
    assert scene.probe(10) == ([(E, 6, 1)], 10)
    assert scene.ring.asked == [MARK, CURSOR, *names(range(6, 11))]


@pytest.mark.parametrize(("until", "last"), [(5, 5), (9, 9), (10, 10), (20, 10)])
def test_until_bounds_the_probe_below_the_target_and_never_raises_it(until, last):
    scene = Scene().hold(f"{E}.5.1", f"{E}.6.1", f"{E}.11.1", marker=2)
    assert scene.probe(10, until) == ([(E, epoch, 1) for epoch in (5, 6) if epoch <= last], last)
    assert scene.ring.asked == [MARK, CURSOR, *names(range(3, last + 1))]


def test_a_marker_at_until_ends_the_probe_though_later_epochs_ended():
    scene = Scene().hold(f"{E}.6.1", marker=5)
    assert scene.probe(10, until=5) == ([], None) and scene.ring.asked == [MARK]


def test_a_keyring_fault_in_the_middle_keeps_and_closes_what_was_found_before_it():
    scene = Scene().hold(f"{E}.3.1", f"{E}.4.2", f"{E}.5.1", f"{E}.6.1", marker=2)
    scene.ring.failing = {f"{E}.5.3"}
    assert scene.probe(10) == ([(E, 3, 1), (E, 4, 2)], 4)
    assert scene.ring.asked == [MARK, CURSOR, *names([3, 4]), f"{E}.5.1", f"{E}.5.2", f"{E}.5.3"]
    assert scene.records.closed == [[(E, 3, 1), (E, 4, 2)]]


def test_a_keyring_fault_past_the_gap_moves_the_cursor_nowhere():
    scene = Scene().hold(f"{E}.3.1", marker=2, cursor=4)
    scene.ring.failing = {f"{E}.5.1"}
    found, probed_to = scene.probe(10)
    assert found == [(E, 3, 1)] and probed_to is None and scene.records.closed == [[(E, 3, 1)]]


@pytest.mark.parametrize("unread", [MARK, CURSOR])
def test_a_marker_the_keyring_fails_to_read_ends_the_probe_with_nothing(unread):
    scene = Scene().hold(f"{E}.3.1", marker=0)
    scene.ring.failing = {unread}
    assert scene.probe(10) == ([], None)
    assert scene.ring.asked == [MARK, CURSOR][:[MARK, CURSOR].index(unread) + 1] and scene.records.closed == []


def test_each_epoch_is_asked_for_attempts_one_to_eight_and_never_another():
    assert MAX_ATTEMPTS == 8
    scene = Scene().hold(f"{E}.5.0", f"{E}.5.1", f"{E}.5.8", f"{E}.5.9", marker=4)
    assert scene.probe(5) == ([(E, 5, 1), (E, 5, 8)], 5)
    assert scene.ring.asked == [MARK, *[f"{E}.5.{attempt}" for attempt in range(1, 9)]]


def test_an_unswept_tombstone_is_left_to_the_sweep_and_one_marked_swept_is_asked_again():
    tombstones = ((E, 5, 2, False), (E, 5, 3, True), (60, 5, 4, False), (E, 4, 5, False))
    scene = Scene(Records(tombstones)).hold(f"{E}.5.2", f"{E}.5.3", f"{E}.5.4", marker=4)
    assert scene.probe(5) == ([(E, 5, 3), (E, 5, 4)], 5)  # 5.3: a writer's swept flag hides nothing
    assert scene.ring.asked == [MARK, *[name for name in names([5]) if name != f"{E}.5.2"]]
    assert scene.records.listings == 1


def test_a_tombstone_of_an_epoch_not_ended_does_not_stop_the_sweep_of_ended_ones():
    records = Records(((E, 11, 2, False), (E, 10, 1, False)), recorded={(E, 11): 1})
    scene = Scene(records).hold(f"{E}.11.2", f"{E}.10.1")
    assert scene.sweeper.sweep(ending(10)) == ([], [])
    assert (SERVICE, f"{E}.11.2") in scene.ring.secrets and (SERVICE, f"{E}.10.1") not in scene.ring.secrets
    assert records.swept == [[(E, 10, 1)]]


@pytest.mark.parametrize(("recorded", "refused"), [(IntegrityError("a malformed row"), []), (1, [(E, 11, 1)]),
                                                   (2, []), (None, [])])
def test_a_tombstone_of_an_epoch_not_ended_is_kept_and_refused_only_when_it_names_the_recorded_key(
        recorded, refused):
    scene = Scene(Records(((E, 11, 1, False),), recorded={(E, 11): recorded})).hold(f"{E}.11.1")
    assert scene.sweeper.sweep(ending(10)) == ([], refused)
    assert (SERVICE, f"{E}.11.1") in scene.ring.secrets and scene.records.swept == [[]]


def test_the_sweepers_repr_shows_nothing_of_its_keyring_or_records():
    assert repr(Scene().sweeper) == "<EpochSweeper>"
