"""The layout of keyring entries (keys/keyring/entries.py): what a vault writes parses back, and anything else is
refused as KeyUnavailable with the remedy, whatever a lying or damaged keyring hands back."""

from __future__ import annotations

import base64
import json
import re

import pytest

from keys.errors import KeyUnavailable
from keys.keyring.entries import (
    MALFORMED,
    MAX_ENTRY_CHARS,
    parse_keyset,
    parse_single_key,
    serialize_keyset,
    serialize_single_key,
)
from keys.keyring.secret import Secret

KEY = bytes(range(32))
KEY_TEXT = base64.b64encode(KEY).decode()
MALFORMED_KEYSET = f"^{re.escape(MALFORMED)}$"


def test_a_single_key_entry_round_trips_and_has_the_documented_layout():
    entry = serialize_single_key(KEY)
    assert json.loads(entry.reveal()) == {"format": "scratchvault-key/1", "key": KEY_TEXT}
    assert parse_single_key(entry, "index key") == KEY


@pytest.mark.parametrize("text", [
    "", "not json", "[]", json.dumps({"format": "scratchvault-key/1"}),
    json.dumps({"format": "scratchvault-key/2", "key": KEY_TEXT}),
    json.dumps({"format": "scratchvault-key/1", "key": KEY_TEXT, "extra": 1}),
    f'{{"format": "scratchvault-key/1", "key": "{KEY_TEXT}", "key": "{KEY_TEXT}"}}',
    json.dumps({"format": "scratchvault-key/1", "key": base64.b64encode(KEY[:31]).decode()}),
    json.dumps({"format": "scratchvault-key/1", "key": KEY_TEXT + "="}),
    json.dumps({"format": "scratchvault-key/1", "key": KEY_TEXT.replace("A", "*", 1)}),
    json.dumps({"format": "scratchvault-key/1", "key": 1}),
    json.dumps({"format": "scratchvault-key/1", "key": KEY_TEXT}) + " " * MAX_ENTRY_CHARS,
])
def test_a_single_key_entry_of_any_other_shape_is_refused_with_the_remedy(text):
    with pytest.raises(KeyUnavailable, match="malformed; restore it from the keyring backup"):
        parse_single_key(Secret(text), "index key")


def test_an_entry_is_parsed_up_to_its_size_bound_and_refused_one_character_past_it():
    entry = json.dumps({"format": "scratchvault-key/1", "key": KEY_TEXT})
    at_bound = entry + " " * (MAX_ENTRY_CHARS - len(entry))  # whitespace JSON allows after the object
    assert parse_single_key(Secret(at_bound), "index key") == KEY
    with pytest.raises(KeyUnavailable, match="malformed; restore it from the keyring backup"):
        parse_single_key(Secret(at_bound + " "), "index key")


def test_a_keyset_entry_round_trips():
    entry = serialize_keyset(2, {1: KEY, 2: bytes(32)})
    assert json.loads(entry.reveal())["keys"] == {"1": KEY_TEXT, "2": base64.b64encode(bytes(32)).decode()}
    assert parse_keyset(entry) == (2, {1: KEY, 2: bytes(32)})


def test_a_keyset_entry_holds_every_version_up_to_the_highest_a_derivation_takes():
    top = 2**31 - 1  # ten digits: a version is four bytes in key derivations and commitments
    assert parse_keyset(serialize_keyset(top, {1: KEY, top: KEY})) == (top, {1: KEY, top: KEY})


@pytest.mark.parametrize(("primary", "keys"), [
    (1, {"01": KEY_TEXT}), (1, {"+1": KEY_TEXT}), (1, {"0": KEY_TEXT}), (1, {"2147483648": KEY_TEXT}),
    (2, {"1": KEY_TEXT}), (True, {"1": KEY_TEXT}), ("1", {"1": KEY_TEXT}), (1, {}), (1, ["1"]),
    (1, {"1": KEY_TEXT, "01": KEY_TEXT}), (1, {"1": KEY_TEXT, "2": "c2hvcnQ="}), (1, {"1": KEY_TEXT, "x": KEY_TEXT}),
    (1, {"1": KEY_TEXT, "1a": KEY_TEXT}), (1, {"1": KEY_TEXT, "1" * 5000: KEY_TEXT}),
    (1, {"1": KEY_TEXT, "\u0661": KEY_TEXT}),
])
def test_a_keyset_entry_with_a_version_or_primary_no_vault_writes_is_refused(primary, keys):
    text = json.dumps({"format": "scratchvault-keyset/1", "primary": primary, "keys": keys})
    with pytest.raises(KeyUnavailable, match=MALFORMED_KEYSET):
        parse_keyset(Secret(text))


@pytest.mark.parametrize("text", [
    "", "not json", "null", "[]", json.dumps({"format": "scratchvault-key/1", "primary": 1, "keys": {"1": KEY_TEXT}}),
    json.dumps({"format": "scratchvault-keyset/1", "primary": 1}),
])
def test_a_keyset_entry_of_another_format_or_shape_is_refused_with_the_remedy(text):
    with pytest.raises(KeyUnavailable, match=MALFORMED_KEYSET):
        parse_keyset(Secret(text))


def test_an_entry_in_transit_never_shows_itself():
    entry = serialize_single_key(KEY)
    assert KEY_TEXT not in repr(entry) and KEY_TEXT not in str(entry)
    with pytest.raises(TypeError):
        hash(entry)
