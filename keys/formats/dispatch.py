"""The one place that tells the formats of a stored part apart, by its first byte and length.

* Wrapped data key: format 3 is exactly WRAPPED_V3_SIZE (65) bytes starting with 0x03; anything else is read as
  format 1 (60 bytes, starting with a random nonce), whose unwrap refuses any other length.
* Summary: 0x05 is format 3, 0x04 format 2, any other first byte format 1 (its random nonce starts with the
  domain byte 0x03, which its open checks); an empty summary is none at all (IntegrityError).

Each format's own opener checks its header again; what it opens under is decided here only.
"""

from __future__ import annotations

from typing import Literal

from keys.epochs.schedule import Epoch
from keys.errors import IntegrityError
from keys.formats.v2 import SUMMARY_V2
from keys.formats.v3 import SUMMARY_V3, WRAP_V3, WRAPPED_V3_SIZE, row_epoch

WrapFormat = Literal[1, 3]
SummaryFormat = Literal[1, 2, 3]


def wrapped_key_format(wrapped: bytes) -> WrapFormat:
    """The format of a stored wrapped data key: 3 (under an epoch) or 1 (under the owner key alone)."""
    return 3 if len(wrapped) == WRAPPED_V3_SIZE and wrapped[0] == WRAP_V3 else 1


def summary_format(sealed: bytes) -> SummaryFormat:
    """The format of a stored summary: 3 (turn and epoch key), 2 (turn key) or 1 (the row's data key)."""
    if not sealed:
        raise IntegrityError("a row's summary is missing")
    if sealed[0] == SUMMARY_V3:
        return 3
    return 2 if sealed[0] == SUMMARY_V2 else 1


def stored_epoch(wrapped: bytes, expires_at: float) -> Epoch | None:
    """(E, e) of a stored row whose wrapped key is of format 3, else None (format 1: under no epoch)."""
    return row_epoch(wrapped, WRAP_V3, expires_at) if wrapped_key_format(wrapped) == 3 else None
