"""Opening one turn's summaries without a row's data key (keys/turn_summaries.py, ``TurnSummaries``) over a small
double of the row recipe (keys/turn_summaries.py ``RowKeys``) that counts each keyset attempt and each epoch key
asked: a listing opens thousands of rows, so after the first row of a key version (format 2) or of a version and
epoch (format 3) the rest open under the kept cipher, with no keyring or key derivation. Every bound of that
shortcut is swept (the shortest summary, expiry 0 and the last expiry below 2**53, the shortest and longest
epoch), and what falls outside it, or is tampered with, is opened (or refused) the long way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import pytest

from keys.epochs.epoch_key import EpochKey
from keys.epochs.schedule import MAX_EPOCH_SECONDS, MIN_EPOCH_SECONDS, Epoch
from keys.errors import IntegrityError, NotFound
from keys.formats.v2 import summary_aads_v2
from keys.formats.v3 import summary_aads_v3
from keys.owner_keyset import OwnerKeyset
from keys.turn_summaries import ListedSummary, TurnSummaries

T = TypeVar("T")
VAULT_ID, OWNER, TURN = bytes(range(16)), bytes(range(32)), bytes(range(32, 64))
E = 3600
LAST_EXPIRY = 2.0**53  # the first expiry the shortcut leaves to the long way
HEAD = b"\x05\x00\x00\x0e\x10"  # format 3, E = 3600


class CountedRecipe:
    """The row recipe's keys for one owner: a keyset and the vault's epoch keys (a missing one was destroyed). It
    records each ``retrying`` (in the recipe, a keyset read from the cache or the keyring) and each epoch key asked."""

    def __init__(self, keyset: OwnerKeyset, epochs: dict[Epoch, EpochKey]) -> None:
        self.keyset, self.epochs = keyset, epochs
        self.attempts: list[tuple[str, int]] = []
        self.epochs_asked: list[Epoch] = []

    @property
    def vault_id(self) -> bytes:
        return VAULT_ID

    def retrying(self, user_id: str, version: int, attempt: Callable[[OwnerKeyset], T]) -> T:
        self.attempts.append((user_id, version))
        return attempt(self.keyset)

    def epoch_key(self, epoch: Epoch) -> EpochKey:
        self.epochs_asked.append(epoch)
        found = self.epochs.get(epoch)
        if found is None:
            raise NotFound()
        return found


class Turn:
    """Alice's turn: rows sealed as a vault seals them, and a TurnSummaries over a counted recipe that opens them."""

    def __init__(self, *epochs: Epoch, versions: int = 1) -> None:
        keyset = OwnerKeyset.generate()
        for version in range(2, versions + 1):
            keyset = keyset.with_new_version(version)
        self.recipe = CountedRecipe(keyset, {epoch: EpochKey.generate() for epoch in epochs})
        self.summaries = TurnSummaries(self.recipe, "alice", OWNER, TURN)
        self.seq = 0

    def v3(self, record: bytes, expires_at: float, length: int = E, version: int = 1) -> ListedSummary:
        epoch = (length, int(expires_at) // length)
        self.seq += 1
        row_id = self.seq.to_bytes(16, "big")
        aad = summary_aads_v3(VAULT_ID, OWNER, TURN)(row_id, expires_at, 100, version, *epoch)
        keys = self.recipe.keyset.epoch_keys(version, self.recipe.epochs[epoch], VAULT_ID, OWNER, epoch)
        return self.seq, row_id, version, expires_at, 100, keys.seal_summary(TURN, record, aad)

    def v2(self, record: bytes, version: int = 1) -> ListedSummary:
        self.seq += 1
        row_id = self.seq.to_bytes(16, "big")
        aad = summary_aads_v2(VAULT_ID, OWNER, TURN)(row_id, 7200.0, 100, version)
        sealed = self.recipe.keyset.turn_key(version, VAULT_ID, TURN).seal_summary(record, aad)
        return self.seq, row_id, version, 7200.0, 100, sealed

    def open(self, listed: ListedSummary) -> tuple[bytes, bool] | None:
        return self.summaries.open(listed, no_wrapped_key)


def no_wrapped_key(seq: int) -> bytes:
    pytest.fail(f"row {seq}: a summary of format 2 or 3 was opened with its row's data key")


# -- format 3 ------------------------------------------------------------------------------------------------------
def test_the_rows_of_one_version_and_epoch_after_the_first_open_without_asking_for_a_key_again():
    turn = Turn((E, 2))
    rows = [turn.v3(f"record {n}".encode(), 7200.0 + n) for n in range(3)]
    assert [turn.open(row) for row in rows] == [(b"record 0", False), (b"record 1", False), (b"record 2", False)]
    assert turn.recipe.attempts == [("alice", 1)] and turn.recipe.epochs_asked == [(E, 2)]


@pytest.mark.parametrize(("record", "expires_at", "length"), [
    (b"", 7200.0, E),  # the shortest summary: header, nonce and tag alone
    (b"r", 0.0, E),  # the first expiry
    (b"r", LAST_EXPIRY - 1, E),  # the last expiry the shortcut takes
    (b"r", 60.0, MIN_EPOCH_SECONDS),
    (b"r", 86400.0, MAX_EPOCH_SECONDS),
])
def test_every_row_within_the_shortcuts_bounds_after_the_first_costs_no_key(record, expires_at, length):
    epoch = (length, int(expires_at) // length)
    turn = Turn(epoch)
    rows = [turn.v3(record, expires_at, length) for _ in range(3)]
    assert [turn.open(row) for row in rows] == [(record, False)] * 3
    assert turn.recipe.attempts == [("alice", 1)] and turn.recipe.epochs_asked == [epoch]


def test_a_row_expiring_at_2_53_is_opened_the_long_way_each_time():
    epoch = (E, int(LAST_EXPIRY) // E)
    turn = Turn(epoch)
    rows = [turn.v3(b"late", LAST_EXPIRY) for _ in range(2)]
    assert [turn.open(row) for row in rows] == [(b"late", False)] * 2
    assert turn.recipe.attempts == [("alice", 1)] * 2 and turn.recipe.epochs_asked == [epoch] * 2


def test_another_epoch_or_version_is_not_opened_under_the_kept_cipher():
    turn = Turn((E, 2), (E, 3), (60, 120), versions=2)
    rows = [turn.v3(b"a", 7200.0), turn.v3(b"b", 10800.0), turn.v3(b"c", 7200.0, 60), turn.v3(b"d", 7201.0, E, 2),
            turn.v3(b"e", 7202.0)]
    assert [turn.open(row) for row in rows] == [(record, False) for record in (b"a", b"b", b"c", b"d", b"e")]
    assert turn.recipe.attempts == [("alice", 1), ("alice", 1), ("alice", 1), ("alice", 2)]
    assert turn.recipe.epochs_asked == [(E, 2), (E, 3), (60, 120), (E, 2)]


@pytest.mark.parametrize("sealed", [b"\x05", b"\x05\x00\x00", HEAD, HEAD + bytes(27)])  # 33 bytes is the shortest
def test_a_truncated_summary_is_refused_even_after_its_epoch_was_opened(sealed):
    turn = Turn((E, 2))
    assert turn.open(turn.v3(b"genuine", 7200.0)) == (b"genuine", False)
    with pytest.raises(IntegrityError):
        turn.open((9, bytes(16), 1, 7200.0, 100, sealed))


def test_a_row_moved_to_another_row_id_fails_under_the_kept_cipher_then_the_long_way():
    turn = Turn((E, 2))
    seq, _, version, expires_at, size, sealed = turn.v3(b"a", 7200.0)
    assert turn.open(turn.v3(b"genuine", 7200.0)) == (b"genuine", False)
    with pytest.raises(IntegrityError):
        turn.open((seq, bytes(16), version, expires_at, size, sealed))
    assert turn.recipe.attempts == [("alice", 1)] * 2


def test_a_row_whose_epoch_key_was_destroyed_is_gone():
    turn = Turn((E, 2))
    row = turn.v3(b"a", 7200.0)
    del turn.recipe.epochs[(E, 2)]
    assert turn.open(row) is None and turn.recipe.attempts == []


# -- format 2 ------------------------------------------------------------------------------------------------------
def test_format_2_rows_of_one_version_after_the_first_open_under_the_kept_turn_key():
    turn = Turn()
    rows = [turn.v2(f"record {n}".encode()) for n in range(3)]
    assert [turn.open(row) for row in rows] == [(b"record 0", False), (b"record 1", False), (b"record 2", False)]
    assert turn.recipe.attempts == [("alice", 1)]


def test_a_format_2_row_of_another_version_asks_for_its_own_turn_key():
    turn = Turn(versions=2)
    rows = [turn.v2(b"a"), turn.v2(b"b", 2), turn.v2(b"c"), turn.v2(b"d", 2)]
    assert [turn.open(row) for row in rows] == [(record, False) for record in (b"a", b"b", b"c", b"d")]
    assert turn.recipe.attempts == [("alice", 1), ("alice", 2)]


def test_a_format_2_row_that_fails_under_the_kept_turn_key_is_tried_the_long_way_then_refused():
    turn = Turn()
    seq, _, version, expires_at, size, sealed = turn.v2(b"a")
    assert turn.open(turn.v2(b"genuine")) == (b"genuine", False)
    with pytest.raises(IntegrityError):
        turn.open((seq, bytes(16), version, expires_at, size, sealed))
    assert turn.recipe.attempts == [("alice", 1)] * 2
