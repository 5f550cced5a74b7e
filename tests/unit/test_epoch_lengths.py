"""The keyring's record of every expiry epoch length a vault made keys for (keys/epochs/lengths.py; threat_model.md,
"Expiry epochs"), on a MemoryKeyring that records each name it is asked for and each write, with a rival process
that writes the list of lengths between a write and its read-back, or right after the read-back. A length missing
from the list, or a made-through marker below a key that was made, leaves that length's keys unprobed once a
writer of the database deletes their records: gc would never destroy them.
"""

from __future__ import annotations

import pytest

from keys.epochs.lengths import MADE, EpochLengths
from keys.epochs.marks import marker_name
from keys.errors import KeyUnavailable
from keys.keyring.edge import KeyringEdge
from keys.testing import MemoryKeyring
from tests.support.fault_counts import FaultDouble, Switch

VAULT = "scratchvault/" + "00" * 16
SERVICE = VAULT + "/epoch-key"
LIST = (VAULT + "/epoch-lengths", "lengths")
UNRECORDED = ("the OS keyring did not keep the record of an expiry epoch key about to be made; nothing was written, "
              "retry")


def made(length: int) -> str:
    return marker_name(length, MADE)


class RivalKeyring(MemoryKeyring, FaultDouble):
    """The in-memory keyring holding the list and made-through markers given, recording the user name of every read
    in ``asked`` and every write in ``written``.
    ``between``: the list of lengths a rival writes after each write of the list and before its read-back;
    ``after``: the lists it writes, one per write, right after the read-back; a read or write of a name in
    ``failing`` raises (and counts the failure)."""

    failing = Switch()

    def __init__(self, listed: str | None = None, made_through: dict[int, int] | None = None) -> None:
        super().__init__()
        self.asked: list[str] = []
        self.written: list[tuple[str, str]] = []
        self.between: str | None = None
        self.after: list[str] = []
        self._read_back_due = False
        if listed is not None:
            self.secrets[LIST] = listed
        for length, epoch in (made_through or {}).items():
            self.secrets[(SERVICE, made(length))] = str(epoch)

    def get_password(self, service: str, username: str) -> str | None:
        self.asked.append(username)
        self._fail(username)
        value = super().get_password(service, username)
        if (service, username) == LIST and self._read_back_due:
            self._read_back_due = False
            if self.after:
                self.secrets[LIST] = self.after.pop(0)
        return value

    def set_password(self, service: str, username: str, password: str) -> None:
        self.written.append((username, password))
        self._fail(username)
        super().set_password(service, username, password)
        if (service, username) == LIST:
            self._read_back_due = True
            if self.between is not None:
                self.secrets[LIST] = self.between

    def _fail(self, username: str) -> None:
        if self.failing and username in self.failing:
            self.failed()
            raise OSError("the keyring is gone")


def lengths_over(ring: RivalKeyring) -> EpochLengths:
    return EpochLengths(KeyringEdge(ring, timeout=5), SERVICE)


def test_the_first_key_of_a_length_lists_it_then_raises_its_made_through_marker_to_the_epoch():
    ring = RivalKeyring()
    lengths_over(ring).before_key(3600, 7)
    assert ring.secrets == {LIST: "3600", (SERVICE, "3600.made-through"): "7"}
    assert ring.written == [("lengths", "3600"), ("3600.made-through", "7")]
    # the list read, written and read back, read once more to see the length stayed; then the marker, likewise
    assert ring.asked == ["lengths"] * 3 + ["3600.made-through"] * 2


def test_a_new_length_joins_the_listed_ones_in_numeric_order():
    ring = RivalKeyring("60,86400")
    lengths_over(ring).before_key(3600, 1)
    assert ring.secrets[LIST] == "60,3600,86400" and ring.written[0] == ("lengths", "60,3600,86400")


def test_a_length_already_listed_is_not_written_again():
    ring = RivalKeyring("60,3600")
    lengths_over(ring).before_key(3600, 1)
    assert ring.written == [("3600.made-through", "1")] and ring.secrets[LIST] == "60,3600"


def test_a_key_of_an_epoch_at_or_below_the_one_made_through_asks_the_keyring_nothing():
    ring = RivalKeyring()
    lengths = lengths_over(ring)
    lengths.before_key(3600, 7)
    ring.asked.clear()
    ring.written.clear()
    lengths.before_key(3600, 7)
    lengths.before_key(3600, 6)
    assert ring.asked == [] and ring.written == []
    lengths.before_key(3600, 8)  # a later epoch raises the marker; the list is not read again
    assert ring.asked == ["3600.made-through", "3600.made-through"] and ring.written == [("3600.made-through", "8")]


def test_a_made_through_marker_another_process_raised_higher_is_read_and_kept():
    ring = RivalKeyring(made_through={3600: 9})
    lengths_over(ring).before_key(3600, 7)
    assert ring.written == [("lengths", "3600")] and ring.secrets[(SERVICE, made(3600))] == "9"


@pytest.mark.parametrize("rival", ["3600,60", "60,120,3600", "0060,3600,abc"])
def test_a_rival_list_holding_every_length_written_between_the_write_and_its_read_back_keeps_the_write(rival):
    # the same lengths spelt otherwise, or with a rival's own length joined (as OpenBao's union of lists does)
    ring = RivalKeyring("60")
    ring.between = rival
    lengths_over(ring).before_key(3600, 1)
    assert ring.secrets[LIST] == rival and ring.secrets[(SERVICE, made(3600))] == "1"
    assert [text for name, text in ring.written if name == "lengths"] == ["60,3600"]


@pytest.mark.parametrize("rival", ["60", "3600", "60,120", ""])
def test_a_rival_list_missing_a_length_written_before_its_read_back_refuses_the_key(rival):
    ring = RivalKeyring("60")
    ring.between = rival
    with pytest.raises(KeyUnavailable, match="did not return it on read-back"):
        lengths_over(ring).before_key(3600, 1)
    assert (SERVICE, made(3600)) not in ring.secrets


def test_a_length_a_rival_writes_over_after_the_read_back_is_written_again():
    ring = RivalKeyring("60")
    ring.after = ["60"]
    lengths_over(ring).before_key(3600, 1)
    assert [text for name, text in ring.written if name == "lengths"] == ["60,3600", "60,3600"]
    assert ring.secrets[LIST] == "60,3600" and ring.secrets[(SERVICE, made(3600))] == "1"


def test_a_list_a_rival_keeps_writing_over_is_written_three_times_then_the_key_is_refused():
    ring = RivalKeyring("60")
    ring.after = ["60", "60", "60"]
    with pytest.raises(KeyUnavailable) as refused:
        lengths_over(ring).before_key(3600, 1)
    assert str(refused.value) == UNRECORDED
    assert ring.written == [("lengths", "60,3600")] * 3 and (SERVICE, made(3600)) not in ring.secrets


def test_a_made_through_marker_the_keyring_will_not_raise_refuses_the_key():
    ring = RivalKeyring()
    ring.failing = {made(3600)}
    with pytest.raises(KeyUnavailable) as refused:
        lengths_over(ring).before_key(3600, 1)
    assert str(refused.value) == UNRECORDED and ring.secrets == {LIST: "3600"}


def test_others_names_every_other_listed_length_with_its_made_through_marker():
    ring = RivalKeyring("60,120,3600,86400", {60: 41, 86400: 0})
    assert lengths_over(ring).others(3600) == [(60, 41), (120, None), (86400, 0)]
    assert ring.asked == ["lengths", made(60), made(120), made(86400)]


def test_others_reads_the_list_once_and_a_marker_only_while_this_process_has_seen_none():
    ring = RivalKeyring("60,120,3600", {60: 41})
    lengths = lengths_over(ring)
    lengths.others(3600)
    ring.secrets[LIST] = "60,120,900,3600"
    ring.asked.clear()
    assert lengths.others(3600) == [(60, 41), (120, None)] and ring.asked == [made(120)]


def test_others_gives_the_highest_made_through_marker_this_process_saw_though_the_keyring_holds_less():
    ring = RivalKeyring()
    lengths = lengths_over(ring)
    lengths.before_key(60, 50)
    ring.secrets[(SERVICE, made(60))] = "41"  # a rival holding less wrote it back
    ring.secrets[LIST] = "60,3600"
    ring.asked.clear()
    assert lengths.others(3600) == [(60, 50)] and ring.asked == ["lengths"]


def test_others_of_a_vault_whose_list_is_missing_is_empty():
    ring = RivalKeyring()
    assert lengths_over(ring).others(3600) == [] and ring.asked == ["lengths"]


@pytest.mark.parametrize("listed", ["0,60", "1,60,5", "59,60,86401", "60,100000,999999,1234567",
                                    "60,0000120", "60,,abc, 120",
                                    "60,-120,+120,1e3,\u0661\u0662\u0660", "60,120;900", "60," + "9" * 5000])
def test_only_lengths_a_vault_can_have_are_read_from_the_list(listed):
    # anything else (a zero above all, that no probe can divide time by) a keyring writer may plant is left out
    ring = RivalKeyring(listed)
    assert lengths_over(ring).others(3600) == [(60, None)]


def test_the_lengths_bounds_are_read_and_a_leading_zero_is_the_same_length():
    ring = RivalKeyring("60,086400,3600")
    assert lengths_over(ring).others(3600) == [(60, None), (86400, None)]


def test_the_lengths_repr_shows_nothing_of_its_keyring():
    assert repr(lengths_over(RivalKeyring())) == "<EpochLengths>"
