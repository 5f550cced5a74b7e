"""Known-answer vectors of row format 3 (tests/vectors/row_format_v3.json; provenance in tests/vectors/README.md): a
row sealed under an expiry epoch. Every value is recomputed through ``keys/``, then the keys, AADs and sealed parts a
second way from the layout threat_model.md ("Row format 3") documents, with the ``cryptography`` package alone, so a
change of ``keys/`` that also regenerated the file still fails here. The frozen row, planted in a database with its
keyring entries, opens through the public API until its epoch's key is gone.
"""

from __future__ import annotations

import contextlib
import json
import math
import struct
from collections.abc import Iterator

import pytest
from cryptography.hazmat.primitives import hashes, hmac
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF, HKDFExpand

from keys.epochs.epoch_key import EpochKey
from keys.errors import IntegrityError
from keys.formats.data_key import DataKey
from keys.owner_keyset import OwnerKeyset
from keys.testing import MemoryKeyring
from tests.support.clock import FakeClock
from tests.support.keyring_entries import holds_a_key
from tests.support.repository import ROOT
from tests.vectors import make_row_v3_vectors as generator
from vault import NotFound, Principal, Vault
from vault.row.format import Metadata, SummaryRecord
from vault.storage.sqlite.schema import MAX_CHUNKS

ROW = json.loads((ROOT / "tests" / "vectors" / "row_format_v3.json").read_text(encoding="utf-8"))
IN, OUT = ROW["inputs"], ROW["outputs"]
LENGTH, VERSION, EXPIRES = IN["epoch_seconds"], IN["key_version"], IN["expires_at"]
EPOCH = OUT["epoch"]["expect"]


def out(name: str):
    value = OUT[name]["expect"]
    return bytes.fromhex(value) if isinstance(value, str) else value


def raw(name: str) -> bytes:
    return bytes.fromhex(IN[name])


# -- the documented layout, with the cryptography package only ---------------------------------------------------
def fields(label: bytes, *parts: bytes) -> bytes:
    return label + b"".join(struct.pack(">I", len(part)) + part for part in parts)


def u64(value: int) -> bytes:
    return struct.pack(">Q", value)


def mac(key: bytes, message: bytes) -> bytes:
    h = hmac.HMAC(key, hashes.SHA256())
    h.update(message)
    return h.finalize()


def expand(key: bytes, info: bytes) -> bytes:
    return HKDFExpand(hashes.SHA256(), 32, info).derive(key)


def wrap_info(owner_tag: bytes) -> bytes:
    return fields(b"scratchvault/epoch-wrap/v1", raw("vault_id"), owner_tag, struct.pack(">I", VERSION), u64(LENGTH),
                  u64(EPOCH))


def summary_info(turn_tag: bytes) -> bytes:
    return fields(b"scratchvault/epoch-summary/v1", raw("vault_id"), struct.pack(">I", VERSION), turn_tag,
                  u64(LENGTH), u64(EPOCH))


def test_the_vector_file_is_what_the_generator_writes_through_keys():
    assert generator.main(["--check"]) == 0


def test_the_expiry_is_inside_its_epoch_not_on_a_boundary():
    assert EPOCH == math.floor(EXPIRES) // LENGTH == 500_001 and out("epoch_end") == (EPOCH + 1) * LENGTH
    assert EPOCH * LENGTH < math.floor(EXPIRES) < (EPOCH + 1) * LENGTH - 1 and EXPIRES != math.floor(EXPIRES)


def test_tags_and_row_id_recompute_independently():
    index_key = raw("index_key")
    owner_tag = mac(index_key, fields(b"scratchvault/owner-tag/v1", IN["user_id"].encode()))
    assert owner_tag == out("owner_tag")
    assert mac(index_key, fields(b"scratchvault/turn-tag/v1", owner_tag, IN["turn_id"].encode())) == out("turn_tag")
    assert mac(index_key, fields(b"scratchvault/index-key-check/v1", raw("vault_id"))) == out("index_key_check")
    id_key = mac(index_key, b"scratchvault/row-id-key/v1\x01")
    block = Cipher(algorithms.AES(id_key), modes.ECB()).encryptor().update(  # one block, as documented
        IN["seq"].to_bytes(8, "big") + raw("row_id_random"))
    assert block == out("row_id")


def test_prk_wrap_and_summary_keys_recompute_independently():
    ikm, salt = raw("owner_key") + raw("epoch_key"), b"scratchvault/epoch-combiner/v1"
    assert mac(salt, ikm) == out("prk")
    assert expand(out("prk"), wrap_info(out("owner_tag"))) == out("wrap_key")
    assert HKDF(hashes.SHA256(), 32, salt, wrap_info(out("owner_tag"))).derive(ikm) == out("wrap_key")
    assert expand(out("prk"), summary_info(out("turn_tag"))) == out("summary_key")
    assert HKDF(hashes.SHA256(), 32, salt, summary_info(out("turn_tag"))).derive(ikm) == out("summary_key")
    check = mac(expand(raw("epoch_key"), b"scratchvault/epoch-check-key/v1"),
                fields(b"scratchvault/epoch-key-check/v1", raw("vault_id"), u64(LENGTH), u64(EPOCH)))
    assert check == out("epoch_key_check")
    # neither key alone: the owner key twice, or the epoch key twice, gives another wrap key
    for alone in (raw("owner_key") * 2, raw("epoch_key") * 2):
        assert HKDF(hashes.SHA256(), 32, salt, wrap_info(out("owner_tag"))).derive(alone) != out("wrap_key")


def test_aads_and_sealed_parts_recompute_independently():
    vault_id, row_id, owner_tag, turn_tag = raw("vault_id"), out("row_id"), out("owner_tag"), out("turn_tag")
    wrap_aad = fields(b"scratchvault/wrap/v3", vault_id, row_id, IN["user_id"].encode(), u64(VERSION), u64(LENGTH),
                      u64(EPOCH))
    assert wrap_aad == out("wrap_aad")
    clear = (vault_id, row_id, owner_tag, turn_tag, struct.pack(">d", EXPIRES), u64(out("size_bytes")))
    assert fields(b"scratchvault/summary/v3", *clear, u64(VERSION), u64(LENGTH), u64(EPOCH)) == out("summary_aad")
    assert fields(b"scratchvault/meta/v1", *clear) == out("metadata_aad")
    nonce, head = raw("wrap_nonce"), b"\x03" + struct.pack(">I", LENGTH)
    wrapped = head + nonce + AESGCM(out("wrap_key")).encrypt(nonce, raw("data_key"), wrap_aad)
    assert wrapped == out("wrapped_key") and len(wrapped) == 65
    nonce = raw("summary_nonce")
    assert b"\x05" + struct.pack(">I", LENGTH) + nonce + AESGCM(out("summary_key")).encrypt(
        nonce, out("summary_plaintext"), out("summary_aad")) == out("sealed_summary")
    nonce = raw("metadata_nonce")
    assert nonce + AESGCM(raw("data_key")).encrypt(nonce, out("metadata_plaintext"), out("metadata_aad")) == \
        out("sealed_metadata")
    chunk_nonce = b"\x01" + bytes(10) + b"\x01"  # domain 1, counter 0, the last chunk
    assert chunk_nonce == out("chunk_nonce_0")
    assert AESGCM(raw("data_key")).decrypt(chunk_nonce, out("sealed_chunk_0"), out("chunk_aad")) == \
        IN["plaintext"].encode()


def expected_metadata() -> Metadata:
    return Metadata(
        user_id=IN["user_id"], actor=IN["actor"], channel=IN["channel"], turn_id=IN["turn_id"],
        step_num=IN["step_num"], executor_name=IN["executor_name"], content_kind=IN["content_kind"],
        size_bytes=out("size_bytes"), size_units=len(IN["plaintext"]), chunk_units=tuple(out("chunk_units")),
        created_at=IN["created_at"], expires_at=EXPIRES)


def expected_summary() -> SummaryRecord:
    return SummaryRecord(IN["step_num"], IN["executor_name"], IN["content_kind"], len(IN["plaintext"]),
                         IN["created_at"], IN["summary"], IN["retained"])


def bound(version: int = VERSION, epoch_key: bytes | None = None, epoch: int = EPOCH):
    keyset = OwnerKeyset(VERSION, {1: raw("owner_key_v1"), VERSION: raw("owner_key")})
    return keyset.epoch_keys(version, EpochKey(epoch_key or raw("epoch_key")), raw("vault_id"), out("owner_tag"),
                             (LENGTH, epoch))


def test_the_frozen_bytes_open_back_to_the_inputs_through_keys_and_nowhere_else():
    data_key = bound().unwrap(out("wrapped_key"), out("wrap_aad"))
    assert Metadata.decode(data_key.open_metadata(out("sealed_metadata"), out("metadata_aad")), MAX_CHUNKS) == \
        expected_metadata()
    opened = bound().open_summary(out("turn_tag"), out("sealed_summary"), out("summary_aad"))
    assert SummaryRecord.decode(opened) == expected_summary()
    assert data_key.open_chunk(0, True, out("sealed_chunk_0"), out("chunk_aad")).decode() == IN["plaintext"]
    assert DataKey(raw("data_key")).open_chunk(0, True, out("sealed_chunk_0"), out("chunk_aad")) == \
        IN["plaintext"].encode()
    others = [bound(epoch=EPOCH + 1), bound(version=1), bound(epoch_key=raw("owner_key"))]
    for other in others:  # the next epoch, the owner's other version, another epoch key: none opens either part
        with pytest.raises(IntegrityError):
            other.unwrap(out("wrapped_key"), out("wrap_aad"))
        with pytest.raises(IntegrityError):
            other.open_summary(out("turn_tag"), out("sealed_summary"), out("summary_aad"))


# -- the frozen row in a database, through the public API -----------------------------------------------------------
def plant(attacker, ring: MemoryKeyring | None = None) -> MemoryKeyring:
    """The frozen row (row, summary, chunk) in the database of ``attacker``, with the vault id, key commitments and
    epoch key commitment it names; and (once) a keyring holding the frozen index, owner key and epoch key entries."""
    if ring is None:
        ring = MemoryKeyring()
        Vault.open(attacker.location, keyring_backend=ring).close()  # a random vault id and keys: replaced below
        ring.secrets.clear()
        entries = [out("keyring_index_entry"), *out("keyring_owner_key_entries"), out("keyring_epoch_entry")]
        ring.secrets.update({(service, user): password for service, user, password in entries})
        attacker.set_meta("vault_id", raw("vault_id"))
        attacker.set_meta("index_key_check", out("index_key_check"))
        attacker.record_commitment(out("owner_tag"), 1, out("owner_key_v1_check"))
        attacker.record_commitment(out("owner_tag"), VERSION, out("owner_key_check"))
        attacker.run(("INSERT INTO epoch_keys (length, epoch, attempt, check_value) VALUES (?, ?, ?, ?)", LENGTH,
                      EPOCH, IN["epoch_attempt"], out("epoch_key_check")))
    columns = {"id": out("row_id"), "owner_tag": out("owner_tag"), "turn_tag": out("turn_tag"),
               "key_version": VERSION, "expires_at": EXPIRES, "size_bytes": out("size_bytes"),
               "wrapped_key": out("wrapped_key"), "metadata": out("sealed_metadata")}
    attacker.insert_row(IN["seq"], columns, out("sealed_summary"), [(0, out("sealed_chunk_0"))])
    return ring


def test_the_frozen_row_opens_through_the_public_api_until_its_epoch_key_is_destroyed(db_path, attacker):
    """Planted with its keyring entries, the frozen row reads, slices and lists before its expiry (and its expiry
    is honoured); once its epoch has ended and gc destroyed the epoch key, the same bytes planted again never open
    with the clock wound back, though both owner key versions are still in the keyring."""
    ring, clock = plant(attacker), FakeClock(IN["created_at"] + 1)
    who, row_id, text = Principal(IN["user_id"], actor="other actor"), out("row_id").hex(), IN["plaintext"]
    with Vault.open(db_path, keyring_backend=ring, clock=clock) as vault:
        record = vault.get(who, row_id)
        assert (record.content, record.summary, record.retained, record.key_version, record.expires_at) == (
            text, IN["summary"], IN["retained"], VERSION, EXPIRES)
        assert (record.owner, record.turn_id, record.step_num, record.executor_name, record.size_bytes) == (
            Principal(IN["user_id"], IN["actor"], IN["channel"]), IN["turn_id"], IN["step_num"],
            IN["executor_name"], out("size_bytes"))
        assert vault.read(who, row_id, mode="range", start=40, end=90).content == text[40:90]
        assert vault.read(who, row_id, mode="tail", n=10).content == text[-10:]
        listed = vault.list_for_turn(who, IN["turn_id"])
        assert [(rep.id, rep.summary, rep.retained) for rep in listed] == [(row_id, IN["summary"], IN["retained"])]
        clock.now = EXPIRES
        assert vault.list_for_turn(who, IN["turn_id"]) == []
    with put_back_after_destruction(db_path, attacker, ring, clock) as vault:
        with pytest.raises(NotFound):
            vault.get(who, row_id)
        assert vault.list_for_turn(who, IN["turn_id"]) == []
        assert vault.stats()["counters"]["integrity_failures"] == 0


@contextlib.contextmanager
def put_back_after_destruction(db_path, attacker, ring: MemoryKeyring, clock: FakeClock) -> Iterator[Vault]:
    """gc once the frozen row's epoch has ended (plus the default skew), then the row's bytes put back, as a restored
    backup would, and the vault opened with the clock wound back to before its expiry."""
    clock.now = out("epoch_end") + 300
    with Vault.open(db_path, keyring_backend=ring, clock=clock) as vault:
        assert vault.gc() == 1
    assert tuple(out("keyring_epoch_entry")[:2]) not in ring.secrets
    keys = [name for name in ring.secrets if holds_a_key(name)]
    assert len(keys) == 3  # the index key and both owner key versions are still there
    plant(attacker, ring)
    clock.now = IN["created_at"] + 1
    with Vault.open(db_path, keyring_backend=ring, clock=clock) as vault:
        yield vault


def test_the_frozen_row_put_back_after_its_epoch_key_was_destroyed_is_not_found_with_the_clock_wound_back(
        db_path, attacker):
    ring, who = plant(attacker), Principal(IN["user_id"])
    with put_back_after_destruction(db_path, attacker, ring, FakeClock(IN["created_at"] + 1)) as vault:
        with pytest.raises(NotFound):
            vault.get(who, out("row_id").hex())
        assert vault.list_for_turn(who, IN["turn_id"]) == []
