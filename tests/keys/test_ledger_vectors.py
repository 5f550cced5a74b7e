"""Known-answer vectors of the deletion ledger and its keyring count (tests/vectors/deletion_ledger_v1.json, computed
independently by tests/vectors/make_ledger_vectors.py with hashlib, hmac and struct alone, and cross-checked with
``openssl dgst -mac HMAC``; provenance in tests/vectors/README.md). ``keys/`` recomputes every value, opens the
frozen ledger back and refuses it altered, and a vault's delete stores exactly this format.

Nothing here regenerates the file: a difference means the ledger format changed, and ledgers already on disk
would no longer verify (every delete and extend_turn of their owners would be refused).
"""

from __future__ import annotations

import base64
import json

import pytest

from keys import DeletionLedgers, IndexKey, KeyringEdge, Ledger, SealedLedger
from keys.errors import IntegrityError
from keys.testing import MemoryKeyring
from tests.support.repository import ROOT
from tests.vectors import make_ledger_vectors as independent
from vault import Principal, Vault

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


def test_a_vaults_delete_stores_the_ledger_and_count_of_the_vectors_format(db_path, keyring_backend, clock,
                                                                           attacker):
    alice = Principal("alice")
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault:
        reps = [vault.put(alice, "t", step, "x", f"row {step}", ttl_seconds=60 * (step + 1)) for step in range(3)]
        for rep in reps[:2]:
            vault.delete(alice, rep.id)
        kept_until = clock() + vault.max_ttl_seconds  # entries outlive every genuine copy (threat_model.md)
    (entry,) = [value for (service, _), value in keyring_backend.secrets.items() if service.endswith("/index")]
    index_key = base64.b64decode(json.loads(entry)["key"])
    vault_id = attacker.meta("vault_id")
    ((owner_tag, (counter, body, tag)),) = attacker.ledgers().items()
    assert owner_tag == independent.owner_tag(index_key, "alice") and counter == 2
    assert body == independent.body([(bytes.fromhex(rep.id), kept_until) for rep in reps[:2]])
    assert tag == independent.ledger_tag(index_key, vault_id, owner_tag, counter, body)
    assert keyring_backend.secrets[(f"scratchvault/{vault_id.hex()}/deletions", owner_tag.hex())] == "2"
