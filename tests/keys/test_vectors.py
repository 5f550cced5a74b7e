"""Known-answer vectors: Wycheproof AES-256-GCM through keys.crypto.aead, our own frozen row format v1 (still read),
and the summary record of format 2 (what the vault writes now).

The files are in tests/vectors/ (provenance in its README.md). Nothing here regenerates them: a difference
means the AEAD or the row format changed, and rows already on disk would no longer open.
"""

from __future__ import annotations

import json

import pytest

from keys.blind_index import IndexKey
from keys.crypto.aead import Aead
from keys.errors import IntegrityError
from keys.formats.context import RowContext
from keys.formats.data_key import DataKey
from keys.formats.stream import chunk_aad, chunk_nonce, context_digest
from keys.formats.v1 import meta_aad, summary_aad, wrap_aad
from keys.formats.v2 import summary_aad_v2
from keys.keyring.edge import KeyringEdge
from keys.keyring.entries import parse_single_key
from keys.keyring.owner_entries import OwnerEntries
from keys.keyring.secret import Secret
from keys.owner_keyset import OwnerKeyset
from keys.testing import MemoryKeyring
from tests.support.clock import FakeClock
from tests.support.repository import ROOT
from vault import Principal, Vault
from vault.row.chunks import chunked, text_pieces
from vault.row.format import Metadata, SummaryRecord
from vault.storage.sqlite.schema import MAX_CHUNKS

VECTORS = ROOT / "tests" / "vectors"
WYCHEPROOF = json.loads((VECTORS / "wycheproof_aes_gcm_256_96.json").read_text())
ROW = json.loads((VECTORS / "row_format_v1.json").read_text(encoding="utf-8"))
IN = ROW["inputs"]
ROW_V2 = json.loads((VECTORS / "row_format_v2.json").read_text(encoding="utf-8"))


# -- Wycheproof ------------------------------------------------------------------------------------------
def test_wycheproof_aes_256_gcm_96_bit_iv_vectors_all_run_and_pass():
    groups = WYCHEPROOF["testGroups"]
    assert groups and all((g["keySize"], g["ivSize"], g["tagSize"]) == (256, 96, 128) for g in groups)
    ran, results = 0, {"valid": 0, "invalid": 0}
    for group in groups:
        for case in group["tests"]:
            key, iv, aad, msg, ct, tag = (bytes.fromhex(case[k]) for k in ("key", "iv", "aad", "msg", "ct", "tag"))
            aead, label = Aead(key), f"tcId {case['tcId']}"
            if case["result"] == "valid":
                assert aead.seal(iv, msg, aad) == ct + tag, label
                assert aead.open(iv, ct + tag, aad) == msg, label
                out = bytearray(len(ct))
                aead.open_into(iv, ct + tag, aad, memoryview(out))
                assert out == msg, label
            else:
                assert case["result"] == "invalid", label
                assert aead.seal(iv, msg, aad) != ct + tag, label
                with pytest.raises(IntegrityError):
                    aead.open(iv, ct + tag, aad)
                with pytest.raises(IntegrityError):
                    aead.open_into(iv, ct + tag, aad, memoryview(bytearray(len(ct))))
            results[case["result"]] += 1
            ran += 1
    assert ran == WYCHEPROOF["numberOfTests"] == sum(len(g["tests"]) for g in groups) == 66
    assert results == {"valid": 39, "invalid": 27}


@pytest.mark.parametrize(("key_size", "nonce_size"), [(16, 12), (24, 12), (32, 8), (32, 16), (32, 0)])
def test_aead_refuses_the_key_and_nonce_sizes_the_vendored_groups_leave_out(key_size, nonce_size):
    with pytest.raises(IntegrityError):
        Aead(bytes(key_size)).seal(bytes(nonce_size), b"x", b"") if key_size == 32 else Aead(bytes(key_size))


# -- row format v1 -----------------------------------------------------------------------------------------
def out(name: str):
    value = ROW["outputs"][name]["expect"]
    return bytes.fromhex(value) if isinstance(value, str) else value


def raw(name: str) -> bytes:
    return bytes.fromhex(IN[name])


def parts():
    """The frozen row's keys, context and clear values, built from the inputs only."""
    version = IN["key_version"]
    return (IndexKey(raw("index_key")), OwnerKeyset(version, {version: raw("owner_key")}), DataKey(raw("data_key")),
            RowContext(raw("vault_id"), raw("row_id")))


def expected_metadata() -> Metadata:
    return Metadata(
        user_id=IN["user_id"], actor=IN["actor"], channel=IN["channel"], turn_id=IN["turn_id"],
        step_num=IN["step_num"], executor_name=IN["executor_name"], content_kind=IN["content_kind"],
        size_bytes=out("size_bytes"), size_units=len(IN["plaintext"]), chunk_units=tuple(out("chunk_units")),
        created_at=IN["created_at"], expires_at=IN["expires_at"],
    )


def expected_summary() -> SummaryRecord:
    return SummaryRecord(IN["step_num"], IN["executor_name"], IN["content_kind"], len(IN["plaintext"]),
                         IN["created_at"], IN["summary"], IN["retained"])


def test_row_format_v1_sealing_reproduces_every_frozen_value():
    index, keyset, data_key, ctx = parts()
    user, turn, version, expires = IN["user_id"], IN["turn_id"], IN["key_version"], IN["expires_at"]
    chunks = list(chunked(text_pieces(IN["plaintext"]), text=True, max_chunks=MAX_CHUNKS))
    assert [len(c.data) for c in chunks] == out("chunk_bytes") and [c.units for c in chunks] == out("chunk_units")
    assert [c.last for c in chunks] == [False, True]
    owner_tag, size = index.owner_tag(user), sum(len(c.data) for c in chunks)
    assert owner_tag == out("owner_tag")
    assert index.turn_tag(owner_tag, turn) == out("turn_tag")
    assert size == out("size_bytes")
    assert index.commitment(ctx.vault_id) == out("index_key_check")
    assert keyset.commitment(version, ctx.vault_id) == out("owner_key_check")
    digest = context_digest(user, turn, IN["step_num"], IN["executor_name"], IN["content_kind"])
    assert digest == out("context_digest")
    assert wrap_aad(ctx, user, version) == out("wrap_aad")
    assert meta_aad(ctx, out("owner_tag"), out("turn_tag"), expires, size) == out("metadata_aad")
    assert summary_aad(ctx, out("owner_tag"), out("turn_tag"), expires, size) == out("summary_aad")
    assert chunk_aad(ctx, digest) == out("chunk_aad")
    assert keyset._wrap_with_nonce(data_key, out("wrap_aad"), raw("wrap_nonce")) == out("wrapped_key")
    # format 1 records are no longer written, only read: the frozen records must still parse to the inputs
    assert Metadata.decode(out("metadata_plaintext"), MAX_CHUNKS) == expected_metadata()
    assert data_key._seal_with_nonce(raw("metadata_nonce"), out("metadata_plaintext"),
                                     out("metadata_aad")) == out("sealed_metadata")
    assert SummaryRecord.decode_v1(out("summary_plaintext")) == expected_summary()
    assert data_key._seal_with_nonce(raw("summary_nonce"), out("summary_plaintext"),
                                     out("summary_aad")) == out("sealed_summary")
    for i, chunk in enumerate(chunks):
        assert chunk_nonce(i, chunk.last) == out(f"chunk_{i}_nonce")
        assert data_key.seal_chunk(i, chunk.last, chunk.data, out("chunk_aad")) == out(f"sealed_chunk_{i}")
    assert out("chunk_positions") == [IN["seq"] << 20 | i for i in range(len(chunks))]
    assert raw("metadata_nonce")[0] == 0x02 and raw("summary_nonce")[0] == 0x03
    assert len(out("wrapped_key")) == 60


def test_row_format_v1_frozen_bytes_open_back_to_the_inputs():
    _, keyset, _, _ = parts()
    data_key = keyset.unwrap(IN["key_version"], out("wrapped_key"), out("wrap_aad"))
    opened = data_key.open_metadata(out("sealed_metadata"), out("metadata_aad"))
    assert Metadata.decode(opened, MAX_CHUNKS) == expected_metadata()
    assert SummaryRecord.decode_v1(data_key.open_summary(out("sealed_summary"), out("summary_aad"))) == \
        expected_summary()
    last = len(out("chunk_bytes")) - 1
    opened = b"".join(data_key.open_chunk(i, i == last, out(f"sealed_chunk_{i}"), out("chunk_aad"))
                      for i in range(last + 1))
    assert opened.decode() == IN["plaintext"]
    with pytest.raises(IntegrityError):  # the frozen bytes are bound: chunk 0 does not open as the last chunk
        data_key.open_chunk(0, True, out("sealed_chunk_0"), out("chunk_aad"))
    with pytest.raises(IntegrityError):  # nor the wrapped key under another key version
        OwnerKeyset(2, {2: raw("owner_key")}).unwrap(2, out("wrapped_key"), wrap_aad(parts()[3], IN["user_id"], 2))


def test_row_format_v1_keyring_entries_parse_to_the_frozen_keys():
    index_service, index_user, index_entry = out("keyring_index_entry")
    assert IndexKey(parse_single_key(Secret(index_entry), "index key")).owner_tag(IN["user_id"]) == out("owner_tag")
    owner_service, owner_user, owner_entry = out("keyring_owner_entry")
    vault_hex = IN["vault_id"]
    assert (index_service, index_user) == (f"scratchvault/{vault_hex}/index", "index")
    assert (owner_service, owner_user) == (f"scratchvault/{vault_hex}/owner", out("owner_tag").hex())
    keyset = OwnerKeyset.parse(Secret(owner_entry))
    assert keyset.primary == IN["key_version"] and keyset.versions == (IN["key_version"],)
    assert keyset.commitment(IN["key_version"], raw("vault_id")) == out("owner_key_check")
    assert json.loads(owner_entry) == json.loads(parts()[1].serialize().reveal())


def out_v2(name: str) -> bytes:
    return bytes.fromhex(ROW_V2["outputs"][name]["expect"])


def test_row_format_v2_records_reproduce_every_frozen_value_and_open_back():
    index, keyset, data_key, ctx = parts()
    assert expected_metadata().encode() == out_v2("metadata_plaintext")
    assert data_key._seal_with_nonce(bytes.fromhex(ROW_V2["inputs"]["metadata_nonce"]), out_v2("metadata_plaintext"),
                                     out("metadata_aad")) == out_v2("sealed_metadata")
    assert Metadata.decode(data_key.open_metadata(out_v2("sealed_metadata"), out("metadata_aad")), MAX_CHUNKS) == \
        expected_metadata()
    version, turn_tag = IN["key_version"], out("turn_tag")
    aad = summary_aad_v2(ctx, out("owner_tag"), turn_tag, IN["expires_at"], out("size_bytes"), version)
    assert aad == out_v2("summary_aad")
    assert expected_summary().encode() == out_v2("summary_plaintext")
    turn_key = keyset.turn_key(version, ctx.vault_id, turn_tag)
    nonce = bytes.fromhex(ROW_V2["inputs"]["summary_nonce"])
    assert turn_key._seal_with_nonce(nonce, out_v2("summary_plaintext"), aad) == out_v2("sealed_summary")
    assert out_v2("sealed_summary")[:13] == b"\x04" + nonce
    assert SummaryRecord.decode(turn_key.open_summary(out_v2("sealed_summary"), aad)) == expected_summary()
    other_turn = index.turn_tag(out("owner_tag"), IN["turn_id"] + "x")
    with pytest.raises(IntegrityError):  # bound to its turn: another turn's key does not open it
        keyset.turn_key(version, ctx.vault_id, other_turn).open_summary(out_v2("sealed_summary"), aad)
    with pytest.raises(IntegrityError):  # nor the key of another version of the same owner
        OwnerKeyset(2, {2: raw("owner_key"), 1: raw("owner_key")[::-1]}).turn_key(
            1, ctx.vault_id, turn_tag).open_summary(out_v2("sealed_summary"), aad)


def frozen_database(attacker, sealed_metadata: bytes, sealed_summary: bytes) -> MemoryKeyring:
    """A database file holding the frozen row (tables as before schema 3, when row ids were random and found
    through an index; upgraded by Vault.open; vault id and row put in by hand, its chunks at the positions
    test_row_format_v1_sealing_reproduces_every_frozen_value checks) with these metadata and summary records,
    and a keyring holding the frozen keys."""
    ring = MemoryKeyring()
    attacker.prepare("legacy")
    Vault.open(attacker.path, keyring_backend=ring).close()  # a random vault id: replaced below
    ring.secrets.clear()
    for service, user, password in (out("keyring_index_entry"), out("keyring_owner_entry")):
        ring.secrets[(service, user)] = password
    assert attacker.counts()[0] == 0
    attacker.set_meta("vault_id", raw("vault_id"))
    attacker.set_meta("index_key_check", out("index_key_check"))
    attacker.record_commitment(out("owner_tag"), IN["key_version"], out("owner_key_check"))
    columns = {"id": raw("row_id"), "owner_tag": out("owner_tag"), "turn_tag": out("turn_tag"),
               "key_version": IN["key_version"], "expires_at": IN["expires_at"], "size_bytes": out("size_bytes"),
               "wrapped_key": out("wrapped_key"), "metadata": sealed_metadata}
    chunks = [(i, out(f"sealed_chunk_{i}")) for i in range(len(out("chunk_positions")))]
    attacker.insert_row(IN["seq"], columns, sealed_summary, chunks)
    return ring


@pytest.mark.sqlite_only("the frozen row comes from a file made before schema 3 (random ids found through an index on "
                         "ids); no PostgreSQL database ever had that layout")
@pytest.mark.parametrize("row_format", [1, 2])
def test_frozen_database_row_opens_end_to_end_through_the_public_api(db_path, attacker, row_format):
    """The frozen row, with its format 1 records (rows written before format 2) or its format 2 records:
    Vault.get, read and list_for_turn return it."""
    meta, sealed = (out("sealed_metadata"), out("sealed_summary")) if row_format == 1 else (
        out_v2("sealed_metadata"), out_v2("sealed_summary"))
    ring = frozen_database(attacker, meta, sealed)
    clock = FakeClock(IN["created_at"] + 1)
    who, row_id, text = Principal(IN["user_id"], actor="other actor"), IN["row_id"], IN["plaintext"]
    with Vault.open(db_path, keyring_backend=ring, clock=clock) as vault:
        record = vault.get(who, row_id)
        assert record.content == text
        assert (record.owner, record.turn_id, record.step_num, record.executor_name, record.content_kind) == (
            Principal(IN["user_id"], IN["actor"], IN["channel"]), IN["turn_id"], IN["step_num"],
            IN["executor_name"], IN["content_kind"])
        assert (record.size_bytes, record.summary, record.retained, record.created_at, record.expires_at,
                record.key_version) == (out("size_bytes"), IN["summary"], IN["retained"], IN["created_at"],
                                        IN["expires_at"], IN["key_version"])
        boundary = out("chunk_units")[0]
        sliced = vault.read(who, row_id, mode="range", start=boundary - 5, end=boundary + 5)
        assert sliced.content == text[boundary - 5:boundary + 5]
        assert vault.read(who, row_id, mode="tail", n=10).content == text[-10:]
        listed = vault.list_for_turn(who, IN["turn_id"])
        assert [(rep.id, rep.summary, rep.retained, rep.step_num) for rep in listed] == [
            (row_id, IN["summary"], IN["retained"], IN["step_num"])]
        clock.now = IN["expires_at"]
        assert vault.list_for_turn(who, IN["turn_id"]) == []
    assert attacker.read(IN["seq"], "summary") == sealed  # reading never rewrites


@pytest.mark.sqlite_only("the frozen row comes from a file made before schema 3 (random ids found through an index on "
                         "ids); no PostgreSQL database ever had that layout")
def test_format_1_row_survives_rotation_rewrap_retirement_and_extension(db_path, attacker):
    """A row written before format 2: rewrap moves its data key (into the epoch of its expiry: format 3) and leaves
    its format 1 summary (sealed by the DEK) as it is; extend_turn writes metadata and summary back in format 3;
    the row reads the same throughout."""
    ring = frozen_database(attacker, out("sealed_metadata"), out("sealed_summary"))
    clock = FakeClock(IN["created_at"] + 1)
    who, user, turn = Principal(IN["user_id"]), IN["user_id"], IN["turn_id"]

    def listed(vault: Vault) -> list:
        return [(rep.id, rep.summary, rep.retained) for rep in vault.list_for_turn(who, turn)]

    expected = [(IN["row_id"], IN["summary"], IN["retained"])]
    with Vault.open(db_path, keyring_backend=ring, clock=clock) as vault:
        assert vault.rotate_owner_key(user) == 2
        assert vault.rewrap(user) == 1
        assert attacker.read(IN["seq"], "summary") == out("sealed_summary")
        assert attacker.read(IN["seq"], "wrapped_key")[0] == 0x03 and len(attacker.read(IN["seq"], "wrapped_key")) == 65
        assert vault.retire_old_key_versions(user) == 1
        assert listed(vault) == expected and vault.get(who, IN["row_id"]).key_version == 2
        assert vault.extend_turn(who, turn, IN["expires_at"] - clock.now + 3600) == 1
        assert attacker.read(IN["seq"], "summary")[0] == 0x05
        # the metadata too: no longer the frozen v1 bytes
        assert attacker.read(IN["seq"], "metadata") != out("sealed_metadata")
        assert listed(vault) == expected
        assert vault.get(who, IN["row_id"]).summary == IN["summary"]


def test_keyring_layout_v2_entries_are_the_frozen_ones():
    """Schema 4's write-once owner key entries, written and read through the real code (tests/vectors/README.md)."""
    frozen = json.loads((VECTORS / "keyring_layout_v2.json").read_text())
    inputs = frozen["inputs"]
    vault_id, owner_tag = bytes.fromhex(inputs["vault_id"]), bytes.fromhex(inputs["owner_tag"])
    for case in frozen["entries"]:
        version = case["version"]
        ring = MemoryKeyring()
        entries = OwnerEntries(KeyringEdge(ring), vault_id, commitments=None)
        keyset = OwnerKeyset(version, {version: bytes.fromhex(inputs["owner_key"])})
        entries.write_new(owner_tag, version, keyset)
        service, user, password = case["expect"]
        assert ring.secrets == {(service, user): password}
        read = entries.read(owner_tag, version)
        assert read is not None and read.commitment(version, vault_id) == keyset.commitment(version, vault_id)
    one = OwnerKeyset(1, {1: bytes.fromhex(inputs["owner_key"])})
    assert one.commitment(1, vault_id).hex() == frozen["commitment_version_1"]
