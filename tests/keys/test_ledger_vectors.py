"""Known-answer vectors of the deletion ledger and its keyring count (tests/vectors/deletion_ledger_v1.json, computed
independently by tests/vectors/make_ledger_vectors.py with hashlib, hmac and struct alone, and cross-checked with
``openssl dgst -mac HMAC``; provenance in tests/vectors/README.md). ``keys/`` recomputes every value, opens the
frozen ledger back and refuses it altered.

Nothing here regenerates the file: a difference means the ledger format changed, and ledgers already on disk
would no longer verify (every delete and extend_turn of their owners would be refused).
"""

from __future__ import annotations

import json

import pytest

from keys import DeletionLedgers, IndexKey, KeyringEdge, Ledger, SealedLedger
from keys.errors import IntegrityError
from keys.testing import MemoryKeyring
from tests.support.repository import ROOT

VECTORS = json.loads((ROOT / "tests" / "vectors" / "deletion_ledger_v1.json").read_text(encoding="utf-8"))
IN, OUT = VECTORS["inputs"], VECTORS["outputs"]
INDEX_KEY, VAULT_ID = bytes.fromhex(IN["index_key"]), bytes.fromhex(IN["vault_id"])


def expect(name: str):
    return OUT[name]["expect"]


def frozen() -> tuple[IndexKey, bytes, DeletionLedgers, MemoryKeyring]:
    index, keyring = IndexKey(INDEX_KEY), MemoryKeyring()
    return index, index.owner_tag(IN["user_id"]), DeletionLedgers(KeyringEdge(keyring), VAULT_ID), keyring


def test_deletion_ledger_v1_sealing_reproduces_every_frozen_value():
    index, owner_tag, ledgers, keyring = frozen()
    assert index._ledger_key.hex() == expect("ledger_key") and owner_tag.hex() == expect("owner_tag")
    ledger = Ledger(IN["counter"], {bytes.fromhex(e["row_id"]): e["expires_at"] for e in IN["entries"]})
    assert ledger.body().hex() == expect("body")
    assert index.ledger_tag(VAULT_ID, owner_tag, IN["counter"], ledger.body()).hex() == expect("tag")
    assert ledgers.seal(index, owner_tag, ledger) == SealedLedger(IN["counter"], bytes.fromhex(expect("body")),
                                                                  bytes.fromhex(expect("tag")))
    ledgers.record(owner_tag, IN["counter"])
    service, user, value = expect("keyring_entry")
    assert keyring.secrets == {(service, user): value} and ledgers.counter(owner_tag) == IN["counter"]


def test_deletion_ledger_v1_frozen_bytes_open_back_and_refuse_any_change():
    index, owner_tag, ledgers, _ = frozen()
    body, tag = bytes.fromhex(expect("body")), bytes.fromhex(expect("tag"))
    opened = ledgers.open(index, owner_tag, SealedLedger(IN["counter"], body, tag))
    assert opened == Ledger(IN["counter"], {bytes.fromhex(e["row_id"]): e["expires_at"] for e in IN["entries"]})
    flipped = lambda data, at: data[:at] + bytes([data[at] ^ 1]) + data[at + 1:]  # noqa: E731
    altered = {"counter_plus_one": (index, owner_tag, SealedLedger(IN["counter"] + 1, body, tag)),
               "counter_minus_one": (index, owner_tag, SealedLedger(IN["counter"] - 1, body, tag)),
               "expiry_flipped": (index, owner_tag, SealedLedger(IN["counter"], flipped(body, 20), tag)),
               "entry_dropped": (index, owner_tag, SealedLedger(IN["counter"], body[24:], tag)),
               "tag_flipped": (index, owner_tag, SealedLedger(IN["counter"], body, flipped(tag, 31))),
               "another_owner": (index, index.owner_tag("bob"), SealedLedger(IN["counter"], body, tag)),
               "another_index_key": (IndexKey(bytes(32)), owner_tag, SealedLedger(IN["counter"], body, tag))}
    for key, tag_of_owner, sealed in altered.values():
        with pytest.raises(IntegrityError, match="fails authentication"):
            ledgers.open(key, tag_of_owner, sealed)
    another_vault = DeletionLedgers(KeyringEdge(MemoryKeyring()), bytes(16))
    with pytest.raises(IntegrityError):
        another_vault.open(index, owner_tag, SealedLedger(IN["counter"], body, tag))
