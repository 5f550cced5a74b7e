"""A format 2 summary under a turn's summary key (keys/formats/v2.py): any record, the empty one included, opens
back; a blob too short to hold the format byte, a nonce and a tag, or of another format, is the one authentication
failure; an owner key of the wrong length is refused, saying so."""

from __future__ import annotations

import re

import pytest

from keys.errors import IntegrityError
from keys.formats.v2 import SUMMARY_V2, TurnKey, turn_summary_key

KEY, AAD = bytes(range(32)), b"summary aad"
ONE_FAILURE = f"^{re.escape('ciphertext failed authentication')}$"


@pytest.mark.parametrize("record", [b"", b"r", bytes(1000)])
def test_every_record_the_empty_one_too_opens_back(record):
    key = TurnKey(KEY)
    assert key.open_summary(key.seal_summary(record, AAD), AAD) == record


def test_a_blob_too_short_or_of_another_format_is_the_one_authentication_failure():
    key = TurnKey(KEY)
    sealed = key.seal_summary(b"record", AAD)
    blobs = [b"", bytes([SUMMARY_V2]), sealed[:28], bytes([SUMMARY_V2 + 1]) + sealed[1:], bytes([5]) + sealed[1:]]
    for blob in blobs:
        with pytest.raises(IntegrityError, match=ONE_FAILURE):
            key.open_summary(blob, AAD)


def test_an_owner_key_of_the_wrong_length_derives_no_turn_key():
    for size in (0, 16, 31, 33):
        with pytest.raises(IntegrityError, match=r"^owner key has the wrong length$"):
            turn_summary_key(bytes(size), bytes(16), 1, bytes(32))
