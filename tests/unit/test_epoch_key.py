"""An expiry epoch's key (keys/epochs/epoch_key.py) on its own: the combiner refuses a key of any other length than 32
bytes on either side, saying which kind of check failed and nothing of the keys, and the commitment to an epoch key
is computed once per vault, length and epoch (every put compares one) and is the same value each time it is asked.
"""

from __future__ import annotations

import pytest

from keys.crypto import kdf
from keys.epochs.epoch_key import EpochKey, combine
from keys.errors import IntegrityError

KEY = bytes(range(32))
VAULT_ID, OTHER_VAULT_ID = bytes(16), bytes(range(16))
E = 3600


@pytest.mark.parametrize(("owner_length", "epoch_length"), [(31, 32), (32, 31), (33, 32), (32, 33), (0, 0)])
def test_the_combiner_refuses_either_key_of_the_wrong_length(owner_length, epoch_length):
    with pytest.raises(IntegrityError) as refused:
        combine(bytes(owner_length), bytes(epoch_length))
    assert str(refused.value) == "a key has the wrong length"


def test_an_epoch_key_combined_with_an_owner_key_of_the_wrong_length_is_refused():
    with pytest.raises(IntegrityError) as refused:
        EpochKey(KEY).combined_with(KEY[:31])
    assert str(refused.value) == "a key has the wrong length"
    assert EpochKey(KEY).combined_with(KEY) == combine(KEY, KEY)


def test_a_commitment_is_computed_once_per_vault_length_and_epoch(monkeypatch):
    macs: list[bytes] = []
    real_mac = kdf.mac

    def counted_mac(key: bytes, message: bytes) -> bytes:
        macs.append(message)
        return real_mac(key, message)

    monkeypatch.setattr(kdf, "mac", counted_mac)
    epoch_key = EpochKey(KEY)
    first = epoch_key.commitment(VAULT_ID, E, 5)
    assert len(macs) == 2  # the check key's expansion and the HMAC itself
    assert epoch_key.commitment(VAULT_ID, E, 5) == first and len(macs) == 2
    others = {epoch_key.commitment(OTHER_VAULT_ID, E, 5), epoch_key.commitment(VAULT_ID, 60, 5),
              epoch_key.commitment(VAULT_ID, E, 6)}
    assert len(macs) == 8 and len(others | {first}) == 4
    assert EpochKey(KEY).commitment(VAULT_ID, E, 5) == first  # the cache holds what is computed, not another value
