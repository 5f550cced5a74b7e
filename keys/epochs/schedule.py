"""The arithmetic of expiry epochs: time cut into epochs of ``length`` seconds (E), numbered from the Unix epoch.

* epoch of an expiry ``t``: ``e = floor(t / E)``; it ends at ``(e + 1) * E``; its key is destroyed after
  ``(e + 1) * E + skew``.

Pure functions on integers; every bound a vault accepts is checked here (InvalidArgument outside it).
"""

from __future__ import annotations

import math

from keys.errors import InvalidArgument

Epoch = tuple[int, int]  # (length in seconds, epoch number)
DEFAULT_EPOCH_SECONDS = 3600  # bench/epoch_keyring.py and threat_model.md, "Expiry epochs", say why
MIN_EPOCH_SECONDS = 60
MAX_EPOCH_SECONDS = 86400
DEFAULT_SKEW_SECONDS = 300
MAX_SKEW_SECONDS = 3600
MAX_EPOCH = 2**63 - 1  # the stores' epoch columns are signed 64-bit


def check_length(length: object) -> int:
    """An epoch length in whole seconds within the bounds, else InvalidArgument."""
    if type(length) is not int or not MIN_EPOCH_SECONDS <= length <= MAX_EPOCH_SECONDS:
        raise InvalidArgument(f"epoch_seconds must be a whole number of seconds from {MIN_EPOCH_SECONDS} to "
                              f"{MAX_EPOCH_SECONDS}")
    return length


def check_skew(skew: object) -> int:
    """A clock-skew allowance in whole seconds within the bounds, else InvalidArgument."""
    if type(skew) is not int or not 0 <= skew <= MAX_SKEW_SECONDS:
        raise InvalidArgument(f"epoch_skew_seconds must be a whole number of seconds from 0 to {MAX_SKEW_SECONDS}")
    return skew


def check_epoch(epoch: object) -> int:
    """An epoch number from 0 to MAX_EPOCH, else InvalidArgument."""
    if type(epoch) is not int or not 0 <= epoch <= MAX_EPOCH:
        raise InvalidArgument("an epoch number is out of range")
    return epoch


def epoch_of(expires_at: float, length: int) -> int:
    """The epoch an expiry falls in, ``floor(expires_at / length)``, computed exactly on integers
    (``floor(floor(t) / E) == floor(t / E)`` for a whole E)."""
    if not math.isfinite(expires_at) or expires_at < 0:
        raise InvalidArgument("an expiry must be a finite, non-negative time")
    return math.floor(expires_at) // check_length(length)


def epoch_end(epoch: int, length: int) -> int:
    """When the epoch ends: the first second no expiry in it reaches."""
    return (epoch + 1) * check_length(length)


def destroy_after(epoch: int, length: int, skew: int) -> int:
    """When the epoch's key may be destroyed: its end plus the skew allowance between hosts' clocks."""
    return epoch_end(epoch, length) + check_skew(skew)


def last_destroyable(now: float, length: int, skew: int) -> int:
    """The last epoch whose key may be destroyed at ``now``: the highest e with ``(e + 1) * length + skew <= now``
    (-1 before the first)."""
    return math.floor(now - skew) // length - 1
