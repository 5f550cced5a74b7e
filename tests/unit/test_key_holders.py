"""Every object of keys/ that holds key material shows only a fixed text naming what it is (never a byte of the
key, so a log line or a traceback with locals carries none) and refuses pickling, saying why, so no key is copied
out of the process by a serializer."""

from __future__ import annotations

import pickle
import re
from collections.abc import Callable

import pytest

from keys.blind_index import IndexKey
from keys.crypto.aead import Aead, BlockPermutation
from keys.epochs.epoch_key import EpochKey
from keys.errors import IntegrityError
from keys.formats.data_key import DataKey
from keys.formats.v2 import TurnKey
from keys.formats.v3 import OwnerEpochKeys
from keys.keyring.secret import Secret

KEY = bytes(range(32))
HOLDERS: dict[str, Callable[[], object]] = {
    "<Aead AES-256-GCM>": lambda: Aead(KEY),
    "<BlockPermutation AES-256>": lambda: BlockPermutation(KEY),
    "<DataKey>": lambda: DataKey(KEY),
    "<TurnKey>": lambda: TurnKey(KEY),
    "<OwnerEpochKeys length=3600 epoch=5>": lambda: OwnerEpochKeys(KEY, EpochKey(KEY), bytes(16), bytes(32), 1,
                                                                   (3600, 5)),
    "<EpochKey>": lambda: EpochKey(KEY),
    "<IndexKey>": lambda: IndexKey(KEY),
    "<secret>": lambda: Secret(KEY.hex()),
}


@pytest.mark.parametrize("shown", HOLDERS)
def test_a_key_holder_shows_only_what_it_is(shown):
    holder = HOLDERS[shown]()
    assert repr(holder) == shown
    assert KEY.hex() not in str(holder)


@pytest.mark.parametrize("shown", HOLDERS)
def test_a_key_holder_refuses_pickling_saying_why(shown):
    with pytest.raises(TypeError, match=f"^{re.escape('key material cannot be pickled')}$"):
        pickle.dumps(HOLDERS[shown]())


@pytest.mark.parametrize(("holder", "refusal"), [
    (Aead, "AES-256-GCM key has the wrong length"), (BlockPermutation, "AES-256 key has the wrong length"),
    (DataKey, "data key has the wrong length"), (EpochKey, "an epoch key has the wrong length"),
    (IndexKey, "index key has the wrong length"),
])
def test_a_key_holder_refuses_a_key_of_the_wrong_length_naming_the_key(holder, refusal):
    for size in (0, 16, 31, 33):
        with pytest.raises(IntegrityError, match=f"^{re.escape(refusal)}$"):
            holder(bytes(size))
