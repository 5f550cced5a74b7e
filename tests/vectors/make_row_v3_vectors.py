"""Generate tests/vectors/row_format_v3.json: frozen known-answer vectors of row format 3, a row whose
data key is wrapped, and whose summary is sealed, under keys derived from its owner key version and the key of the
expiry epoch its expiry falls in (keys/formats/v3.py; threat_model.md, "Row format 3").

Run by hand, once per format version, from the repository root::

    python -m tests.vectors.make_row_v3_vectors            # writes the file
    python -m tests.vectors.make_row_v3_vectors --check    # exit 1 if the file differs from what it would write

The row is sealed exactly as ``Vault.put`` seals one, through the public functions of ``keys/`` and ``vault/row/``,
except that the random values (keys, row id bits, nonces) are fixed here and enter through the test seams
``OwnerEpochKeys._wrap_with_nonce``, ``OwnerEpochKeys._seal_summary_with_nonce`` and ``DataKey._seal_with_nonce``.
``tests/keys/test_row_v3_vectors.py`` recomputes every output through ``keys/``, and the keys, the AADs and every
sealed part a second way from the documented layout with the ``cryptography`` package alone (HKDF, HMAC, AESGCM,
AES-ECB), so a change of ``keys/`` that also regenerated this file is still caught. Regenerating the file to make
that test pass defeats its purpose: a difference means the format changed, and rows on disk would stop opening.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from keys.blind_index import IndexKey
from keys.epochs import schedule
from keys.epochs.epoch_key import EpochKey, combine, epoch_name
from keys.formats import v3
from keys.formats.context import Columns, RowContext
from keys.formats.data_key import DataKey
from keys.formats.stream import chunk_aad, chunk_nonce, context_digest
from keys.formats.v1 import meta_aad
from keys.formats.v3 import summary_aad_v3, wrap_aad_v3
from keys.owner_keyset import OwnerKeyset
from vault.row.chunks import chunked, text_pieces
from vault.row.format import Metadata, SummaryRecord
from vault.storage.sqlite.schema import MAX_CHUNKS

OUT = Path(__file__).with_name("row_format_v3.json")


def _fixed(label: str, size: int) -> str:
    """A fixed, random-looking value (hex) derived from a label, so the inputs are not all-zero patterns."""
    return hashlib.sha256(b"scratchvault row format v3 vector/" + label.encode()).digest()[:size].hex()


def inputs() -> dict:
    """Every input of the row, JSON-ready (bytes in hex). The expiry is inside its epoch, not on a boundary: one
    hour and a half after creation, 1,800.75 s into epoch 500,001 of 3,600 s."""
    created_at = 1_800_000_000.25
    return {
        "owner_key": _fixed("owner key v2", 32), "key_version": 2, "owner_key_v1": _fixed("owner key v1", 32),
        "epoch_key": _fixed("epoch key", 32), "epoch_seconds": 3600, "epoch_attempt": 1,
        "index_key": _fixed("index key", 32), "data_key": _fixed("data key", 32),
        "vault_id": _fixed("vault id", 16), "seq": 1, "row_id_random": _fixed("row id random bits", 8),
        "user_id": "alice-é", "actor": "planner", "channel": "web", "turn_id": "turn-ü-7", "step_num": 3,
        "executor_name": "web.fetch", "content_kind": "text",
        "created_at": created_at, "expires_at": created_at + 5400.5,
        "wrap_nonce": _fixed("wrap nonce", 12), "metadata_nonce": "02" + _fixed("metadata nonce", 11),
        "summary_nonce": _fixed("summary nonce", 12),
        "summary": "text; begins: a frozen row of format 3 …", "retained": {"source": "frozen vector ✓"},
        "plaintext": "a frozen row of format 3: résumé, € and 𝄞\n" * 40,
    }


def row_parts(given: dict) -> dict:
    """The row's clear values and records: chunks, tags, id, metadata and summary records."""
    index = IndexKey(bytes.fromhex(given["index_key"]))
    chunks = list(chunked(text_pieces(given["plaintext"]), text=True, max_chunks=MAX_CHUNKS))
    owner_tag = index.owner_tag(given["user_id"])
    block = given["seq"].to_bytes(8, "big") + bytes.fromhex(given["row_id_random"])
    size_bytes, units = sum(len(c.data) for c in chunks), sum(c.units for c in chunks)
    metadata = Metadata(
        user_id=given["user_id"], actor=given["actor"], channel=given["channel"], turn_id=given["turn_id"],
        step_num=given["step_num"], executor_name=given["executor_name"], content_kind=given["content_kind"],
        size_bytes=size_bytes, size_units=units, chunk_units=tuple(c.units for c in chunks),
        created_at=given["created_at"], expires_at=given["expires_at"])
    summary = SummaryRecord(given["step_num"], given["executor_name"], given["content_kind"], units,
                            given["created_at"], given["summary"], given["retained"])
    return {"index": index, "chunks": chunks, "owner_tag": owner_tag,
            "turn_tag": index.turn_tag(owner_tag, given["turn_id"]),
            "row_id": index._row_ids.encrypt(block), "size_bytes": size_bytes,
            "metadata": metadata.encode(), "summary": summary.encode()}


def outputs(given: dict) -> dict:
    """Every output, computed with the code of keys/ and vault/row/: name -> {"how", "expect"}."""
    raw = {k: bytes.fromhex(given[k]) for k in ("owner_key", "owner_key_v1", "epoch_key", "data_key", "vault_id")}
    version, length, user_id = given["key_version"], given["epoch_seconds"], given["user_id"]
    row = row_parts(given)
    owner_tag, turn_tag, size, expires = row["owner_tag"], row["turn_tag"], row["size_bytes"], given["expires_at"]
    number = schedule.epoch_of(expires, length)
    keyset = OwnerKeyset(version, {1: raw["owner_key_v1"], version: raw["owner_key"]})
    epoch_key, data_key = EpochKey(raw["epoch_key"]), DataKey(raw["data_key"])
    bound = keyset.epoch_keys(version, epoch_key, raw["vault_id"], owner_tag, (length, number))
    ctx = RowContext(raw["vault_id"], row["row_id"])
    prk = combine(raw["owner_key"], raw["epoch_key"])
    digest = context_digest(user_id, given["turn_id"], given["step_num"], given["executor_name"],
                            given["content_kind"])
    aads = {"wrap_aad": wrap_aad_v3(ctx, user_id, version, length, number),
            "summary_aad": summary_aad_v3(ctx, Columns(row["row_id"], owner_tag, turn_tag, size), expires, version,
                                          (length, number)),
            "metadata_aad": meta_aad(ctx, owner_tag, turn_tag, expires, size), "chunk_aad": chunk_aad(ctx, digest)}
    vault_hex = raw["vault_id"].hex()
    result = {
        "owner_tag": ("IndexKey.owner_tag(user_id)", owner_tag),
        "turn_tag": ("IndexKey.turn_tag(owner tag, turn_id)", turn_tag),
        "row_id": ("AES-256(HMAC-SHA256(index key, 'scratchvault/row-id-key/v1' || 0x01), seq u64 || row_id_random)",
                   row["row_id"]),
        "index_key_check": ("meta 'index_key_check': IndexKey.commitment(vault_id)",
                            row["index"].commitment(raw["vault_id"])),
        "owner_key_check": ("owner_keys.check_value of key_version: OwnerKeyset.commitment(v, vault_id)",
                            keyset.commitment(version, raw["vault_id"])),
        "owner_key_v1_check": ("owner_keys.check_value of version 1", keyset.commitment(1, raw["vault_id"])),
        "epoch_key_check": ("epoch_keys.check_value: EpochKey.commitment(vault_id, E, e)",
                            epoch_key.commitment(raw["vault_id"], length, number)),
        "prk": ("HKDF-Extract(salt 'scratchvault/epoch-combiner/v1', owner key v || epoch key)", prk),
        "wrap_key": ("HKDF-Expand(PRK, fields('scratchvault/epoch-wrap/v1', vault_id, owner tag, v u32, E u64, "
                     "e u64), 32)", v3.wrap_key(prk, raw["vault_id"], owner_tag, version, length, number)),
        "summary_key": ("HKDF-Expand(PRK, fields('scratchvault/epoch-summary/v1', vault_id, v u32, turn tag, E u64, "
                        "e u64), 32)", v3.summary_key(prk, raw["vault_id"], version, turn_tag, length, number)),
        "context_digest": ("envelope.context_digest of the row", digest),
        "wrap_aad": ("fields('scratchvault/wrap/v3', vault_id, row_id, user_id, v u64, E u64, e u64)",
                     aads["wrap_aad"]),
        "summary_aad": ("fields('scratchvault/summary/v3', vault_id, row_id, owner tag, turn tag, expires_at f64, "
                        "size u64, v u64, E u64, e u64)", aads["summary_aad"]),
        "metadata_aad": ("envelope.meta_aad (as format 1)", aads["metadata_aad"]),
        "chunk_aad": ("envelope.chunk_aad (as format 1)", aads["chunk_aad"]),
        "wrapped_key": ("0x03 || E u32 || wrap nonce || AES-256-GCM(wrap key, data key, wrap_aad) (65 bytes)",
                        bound._wrap_with_nonce(data_key, aads["wrap_aad"], bytes.fromhex(given["wrap_nonce"]))),
        "metadata_plaintext": ("Metadata.encode() (format 2, binary)", row["metadata"]),
        "sealed_metadata": ("metadata nonce || AES-256-GCM(data key, metadata_plaintext, metadata_aad)",
                            data_key._seal_with_nonce(bytes.fromhex(given["metadata_nonce"]), row["metadata"],
                                                      aads["metadata_aad"])),
        "summary_plaintext": ("SummaryRecord.encode() (format 2, binary)", row["summary"]),
        "sealed_summary": ("0x05 || E u32 || summary nonce || AES-256-GCM(summary key, summary_plaintext, "
                           "summary_aad)", bound._seal_summary_with_nonce(turn_tag, row["summary"], aads["summary_aad"],
                                                                          bytes.fromhex(given["summary_nonce"]))),
    }
    for i, chunk in enumerate(row["chunks"]):
        result[f"sealed_chunk_{i}"] = (f"AES-256-GCM(data key, chunk, chunk_aad) under chunk_nonce({i}, "
                                       f"last={chunk.last}) (as format 1)",
                                       data_key.seal_chunk(i, chunk.last, chunk.data, aads["chunk_aad"]))
    outs = {name: {"how": how, "expect": value.hex()} for name, (how, value) in result.items()}
    outs["chunk_nonce_0"] = {"how": "envelope.chunk_nonce(0, last=True)", "expect": chunk_nonce(0, True).hex()}
    outs["epoch"] = {"how": "e = floor(expires_at) // E", "expect": number}
    outs["epoch_end"] = {"how": "(e + 1) * E: the row's copies die once gc runs after this plus the skew allowance",
                         "expect": schedule.epoch_end(number, length)}
    outs["size_bytes"] = {"how": "rows.size_bytes", "expect": size}
    outs["chunk_units"] = {"how": "characters per chunk (metadata chunk_units)",
                           "expect": [c.units for c in row["chunks"]]}
    outs["keyring_index_entry"] = {"how": "(service, user, password) of the index key",
                                   "expect": [f"scratchvault/{vault_hex}/index", "index",
                                              row["index"].serialize().reveal()]}
    outs["keyring_owner_key_entries"] = {
        "how": "(service, user = owner tag hex '.' version, password) of each owner key version (schema 4 layout)",
        "expect": [[f"scratchvault/{vault_hex}/owner-key", f"{owner_tag.hex()}.{v}", keyset.entry(v).reveal()]
                   for v in (1, version)]}
    outs["keyring_epoch_entry"] = {
        "how": "(service, user = E '.' e '.' attempt, password) of the epoch key",
        "expect": [f"scratchvault/{vault_hex}/epoch-key", epoch_name(length, number, given["epoch_attempt"]),
                   epoch_key.entry().reveal()]}
    return outs


def document() -> str:
    given = inputs()
    return json.dumps({
        "source": "scratchvault row format v3 (rows sealed under expiry epochs), generated by "
                  "tests/vectors/make_row_v3_vectors.py (run by hand); bytes are hex; see tests/vectors/README.md",
        "format_version": 3,
        "fields": "fields(label, *parts) = label || (uint32 big-endian length || part)*",
        "inputs": given,
        "outputs": outputs(given),
    }, indent=1, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    text = document()
    if "--check" in argv:
        return 0 if OUT.exists() and OUT.read_text(encoding="utf-8") == text else 1
    OUT.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
