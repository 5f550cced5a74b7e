"""Known-answer vectors of expiry epochs (tests/vectors/epoch_keys_v1.json, computed by
tests/vectors/make_epoch_vectors.py with hashlib, hmac and struct alone, and cross-checked with ``openssl kdf HKDF``;
provenance in tests/vectors/README.md). ``keys/`` recomputes every value, the ``cryptography`` package's
HKDF classes compute the keys a third way, and the properties the construction rests on are tried directly: each
input changes the keys, and neither key alone gives them.
"""

from __future__ import annotations

import json
import pickle

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF, HKDFExpand

from keys.crypto import labels
from keys.epochs import schedule
from keys.epochs.epoch_key import EpochKey, combine, epoch_name
from keys.errors import InvalidArgument
from keys.formats import v3
from keys.keyring.entries import parse_single_key
from tests.support.repository import ROOT
from tests.vectors import make_epoch_vectors as independent

VECTORS = json.loads((ROOT / "tests" / "vectors" / "epoch_keys_v1.json").read_text(encoding="utf-8"))
IN, OUT = VECTORS["inputs"], VECTORS["outputs"]
OWNER_KEY, EPOCH_KEY = bytes.fromhex(IN["owner_key"]), bytes.fromhex(IN["epoch_key"])
VAULT_ID, OWNER_TAG, TURN_TAG = (bytes.fromhex(IN[name]) for name in ("vault_id", "owner_tag", "turn_tag"))
VERSION, LENGTH, SKEW = IN["version"], IN["length"], IN["skew"]
EPOCH = OUT["epoch"]["expect"]


def expect(name: str):
    return OUT[name]["expect"]


def test_the_vector_file_is_what_the_independent_generator_writes():
    assert independent.main(["--check"]) == 0


def test_epoch_numbers_reproduce_the_frozen_values_on_and_around_a_boundary():
    found = [schedule.epoch_of(t, LENGTH) for t in IN["expiries"]]
    found += [schedule.epoch_of(IN["expiries"][2], other) for other in IN["other_lengths"]]
    assert found == expect("epochs")
    assert schedule.epoch_end(EPOCH, LENGTH) == expect("epoch_end")
    assert schedule.destroy_after(EPOCH, LENGTH, SKEW) == expect("destroy_after")


def test_keys_reproduce_the_frozen_values():
    prk = combine(OWNER_KEY, EPOCH_KEY)
    assert prk.hex() == expect("prk") and EpochKey(EPOCH_KEY).combined_with(OWNER_KEY) == prk
    assert v3.wrap_key(prk, VAULT_ID, OWNER_TAG, VERSION, LENGTH, EPOCH).hex() == expect("wrap_key")
    assert v3.summary_key(prk, VAULT_ID, VERSION, TURN_TAG, LENGTH, EPOCH).hex() == expect("summary_key")
    assert EpochKey(EPOCH_KEY).commitment(VAULT_ID, LENGTH, EPOCH).hex() == expect("commitment")
    service, user = expect("keyring_entry")
    assert user == epoch_name(LENGTH, EPOCH, IN["attempt"]) and service.endswith("/epoch-key")


def test_the_cryptography_packages_hkdf_gives_the_same_keys():
    def hkdf(info: str) -> str:
        return HKDF(hashes.SHA256(), 32, labels.EPOCH_COMBINER, bytes.fromhex(info)).derive(OWNER_KEY + EPOCH_KEY).hex()

    assert hkdf(expect("wrap_info")) == expect("wrap_key") and hkdf(expect("summary_info")) == expect("summary_key")
    check_key = HKDFExpand(hashes.SHA256(), 32, labels.EPOCH_CHECK_KEY).derive(EPOCH_KEY)
    assert independent.hmac.new(check_key, independent.fields(
        labels.EPOCH_KEY_CHECK, VAULT_ID, LENGTH.to_bytes(8, "big"), EPOCH.to_bytes(8, "big")),
        "sha256").hexdigest() == expect("commitment")


def _wrap(owner_key=OWNER_KEY, epoch_key=EPOCH_KEY, vault_id=VAULT_ID, owner_tag=OWNER_TAG, version=VERSION,
          length=LENGTH, epoch=EPOCH) -> bytes:
    return v3.wrap_key(combine(owner_key, epoch_key), vault_id, owner_tag, version, length, epoch)


def test_every_input_changes_the_wrap_key_and_swapping_the_two_keys_does_too():
    other = bytes(32)
    variants = [_wrap(owner_key=other), _wrap(epoch_key=other), _wrap(owner_key=EPOCH_KEY, epoch_key=OWNER_KEY),
                _wrap(vault_id=bytes(16)), _wrap(owner_tag=TURN_TAG), _wrap(version=VERSION + 1),
                _wrap(length=900, epoch=EPOCH * 4), _wrap(epoch=EPOCH + 1)]
    assert len({_wrap(), *variants}) == len(variants) + 1


def test_summary_and_wrap_keys_of_one_owner_key_and_epoch_differ_and_name_their_turn():
    prk = combine(OWNER_KEY, EPOCH_KEY)
    summary = v3.summary_key(prk, VAULT_ID, VERSION, TURN_TAG, LENGTH, EPOCH)
    assert summary != v3.wrap_key(prk, VAULT_ID, TURN_TAG, VERSION, LENGTH, EPOCH)
    assert summary != v3.summary_key(prk, VAULT_ID, VERSION, OWNER_TAG, LENGTH, EPOCH)


def test_neither_key_alone_gives_the_keys_an_attacker_holding_the_other_might_try():
    prk = combine(OWNER_KEY, EPOCH_KEY)
    wrap = v3.wrap_key(prk, VAULT_ID, OWNER_TAG, VERSION, LENGTH, EPOCH)
    info = bytes.fromhex(expect("wrap_info"))
    for alone in (OWNER_KEY, EPOCH_KEY):  # used as the PRK, as the IKM, or paired with zeros
        tries = [HKDFExpand(hashes.SHA256(), 32, info).derive(alone),
                 HKDF(hashes.SHA256(), 32, labels.EPOCH_COMBINER, info).derive(alone),
                 _wrap(owner_key=alone, epoch_key=bytes(32)), _wrap(owner_key=bytes(32), epoch_key=alone)]
        assert wrap not in tries


@pytest.mark.parametrize("length", [59, 86401, 3600.0, True, "3600"])
def test_an_epoch_length_outside_the_bounds_or_not_whole_seconds_is_refused(length):
    with pytest.raises(InvalidArgument, match="epoch_seconds"):
        schedule.epoch_of(1e9, length)


@pytest.mark.parametrize("skew", [-1, 3601, 1.5])
def test_a_skew_allowance_outside_the_bounds_is_refused(skew):
    with pytest.raises(InvalidArgument, match="epoch_skew_seconds"):
        schedule.destroy_after(EPOCH, LENGTH, skew)


@pytest.mark.parametrize("expires_at", [float("nan"), float("inf"), -1.0])
def test_an_expiry_that_is_no_time_has_no_epoch(expires_at):
    with pytest.raises(InvalidArgument):
        schedule.epoch_of(expires_at, LENGTH)


def test_an_epoch_key_is_never_shown_or_pickled_and_its_entry_parses_back():
    key = EpochKey(EPOCH_KEY)
    assert EPOCH_KEY.hex() not in repr(key) and parse_single_key(key.entry(), "epoch key") == EPOCH_KEY
    with pytest.raises(TypeError):
        pickle.dumps(key)
    assert EpochKey.generate().commitment(VAULT_ID, LENGTH, EPOCH) != key.commitment(VAULT_ID, LENGTH, EPOCH)
