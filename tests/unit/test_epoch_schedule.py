"""The arithmetic of expiry epochs (keys/epochs/schedule.py) at its boundaries: which epoch an expiry falls in,
when an epoch ends, and when its key may be destroyed."""

from __future__ import annotations

import math

import pytest

from keys.epochs.epoch_key import epoch_name
from keys.epochs.schedule import (
    MAX_EPOCH,
    check_epoch,
    check_length,
    check_skew,
    destroy_after,
    epoch_end,
    epoch_of,
    last_destroyable,
)
from keys.errors import InvalidArgument

E = 3600


@pytest.mark.parametrize(("expires_at", "epoch"), [
    (0.0, 0), (E - 1.0, 0), (E - 1e-6, 0), (float(E), 1), (E + 1e-6, 1), (2 * E - 0.5, 1), (2.0 * E, 2),
])
def test_an_expiry_falls_in_the_epoch_that_holds_it_and_an_end_belongs_to_the_next(expires_at, epoch):
    assert epoch_of(expires_at, E) == epoch
    assert epoch_end(epoch, E) > expires_at >= epoch * E


@pytest.mark.parametrize("expires_at", [-1e-9, -1.0, math.inf, math.nan])
def test_an_expiry_before_the_unix_epoch_or_not_finite_has_no_epoch(expires_at):
    with pytest.raises(InvalidArgument) as refused:
        epoch_of(expires_at, E)
    assert str(refused.value) == "an expiry must be a finite, non-negative time"


@pytest.mark.parametrize("length", [59, 86401, 3600.0, True, "3600"])
def test_a_length_outside_one_minute_to_one_day_or_not_an_int_is_refused(length):
    with pytest.raises(InvalidArgument):
        check_length(length)


def test_the_length_and_skew_bounds_are_inclusive():
    assert (check_length(60), check_length(86400), check_skew(0), check_skew(3600)) == (60, 86400, 0, 3600)
    for skew in (-1, 3601, 1.0):
        with pytest.raises(InvalidArgument):
            check_skew(skew)


def test_an_epochs_key_may_go_exactly_at_its_end_plus_the_skew_and_not_a_moment_before():
    skew = 300
    assert destroy_after(5, E, skew) == 6 * E + skew
    assert last_destroyable(6 * E + skew, E, skew) == 5
    assert last_destroyable(6 * E + skew - 1e-6, E, skew) == 4
    assert last_destroyable(skew + E - 1, E, skew) == -1  # before the first epoch has ended


def test_epoch_numbers_and_names_stay_within_what_the_stores_hold():
    assert check_epoch(MAX_EPOCH) == MAX_EPOCH and epoch_name(E, 7, 2) == "3600.7.2"
    for epoch in (-1, MAX_EPOCH + 1, True):
        with pytest.raises(InvalidArgument) as refused:
            check_epoch(epoch)
        assert str(refused.value) == "an epoch number is out of range"
