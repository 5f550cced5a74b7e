"""Generate tests/vectors/row_format_v1.json and row_format_v2.json: frozen known-answer vectors of
scratchvault's row format v1, and of what format 2 changed (the summary record, under the turn summary key).

Run by hand, once per format version, from the repository root::

    python -m tests.vectors.make_row_vectors            # writes both files
    python -m tests.vectors.make_row_vectors --check    # exit 1 if a file differs from what it would write

The test suite never runs this; ``tests/keys/test_vectors.py`` recomputes every output from the file's inputs and
compares. Regenerating the file to make that test pass defeats its purpose: a difference means the format
changed, and rows already on disk would no longer open. Bump the format version instead.

The row is sealed exactly as ``Vault.put`` seals one, except that the random values (keys, ids, nonces) are
fixed here. Random nonces enter through the test seams ``OwnerKeyset._wrap_with_nonce`` and
``DataKey._seal_with_nonce`` (and ``TurnKey._seal_with_nonce`` for format 2); everything else uses the public
functions of ``keys/`` and ``vault/row/``, except the format 1 metadata and summary records, which the vault no
longer writes (it still reads them): ``_metadata_v1`` and ``_summary_v1`` below are the encoders it had.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
from pathlib import Path

from keys.blind_index import IndexKey
from keys.formats.context import RowContext
from keys.formats.data_key import DataKey
from keys.formats.stream import chunk_aad, chunk_nonce, context_digest
from keys.formats.v1 import meta_aad, summary_aad, wrap_aad
from keys.formats.v2 import summary_aad_v2
from keys.owner_keyset import OwnerKeyset
from vault.row.chunks import chunked, text_pieces
from vault.row.format import Metadata, SummaryRecord, _runs
from vault.storage.sqlite.schema import MAX_CHUNKS

OUT = Path(__file__).with_name("row_format_v1.json")
OUT_V2 = Path(__file__).with_name("row_format_v2.json")


def _metadata_v1(metadata: Metadata) -> bytes:
    """The format 1 metadata encoder (compact JSON, chunk sizes as runs), as the vault had it before format 2."""
    fields = {name: getattr(metadata, name) for name in metadata.__slots__}
    fields["chunk_units"] = _runs(metadata.chunk_units)
    return json.JSONEncoder(separators=(",", ":")).encode({"format": 1, **fields}).encode()


def _summary_v1(record: SummaryRecord) -> bytes:
    """The format 1 summary encoder (JSON, format version inside), as the vault had it before format 2."""
    fields = {name: getattr(record, name) for name in record.__slots__}
    return json.JSONEncoder(ensure_ascii=False).encode({"format": 1, **fields}).encode("utf-8", "replace")


def _fixed(label: str, size: int) -> str:
    """A fixed, random-looking value (hex) derived from a label, so the inputs are not all-zero patterns."""
    return hashlib.sha256(b"scratchvault row format v1 vector/" + label.encode()).digest()[:size].hex()


def _plaintext() -> str:
    """Lines of text, then a 3-byte character straddling the 64 KiB boundary (the chunker must cut before
    it), then a short tail with 2- and 4-byte characters."""
    lines, size = [], 0
    while size + len(line := f"frozen line {len(lines):05d}: résumé\n".encode()) <= 65535:
        lines.append(line.decode())
        size += len(line)
    head = "".join(lines) + "." * (65535 - size)  # 65,535 bytes of 1- and 2-byte characters
    return head + "€ tail of the frozen row ✓ 𝄞\n"


def inputs() -> dict:
    """Every input of the row, JSON-ready (bytes in hex)."""
    created_at = 1_800_000_000.25
    return {
        "owner_key": _fixed("owner key v1", 32),
        "key_version": 1,
        "data_key": _fixed("data key", 32),
        "index_key": _fixed("index key", 32),
        "vault_id": _fixed("vault id", 16),
        "row_id": _fixed("row id", 16),
        "seq": 1,
        "user_id": "alice-é",
        "actor": "planner",
        "channel": "web",
        "turn_id": "turn-ü-7",
        "step_num": 3,
        "executor_name": "web.fetch",
        "content_kind": "text",
        "created_at": created_at,
        "expires_at": created_at + 3600.5,
        "wrap_nonce": _fixed("wrap nonce", 12),
        "metadata_nonce": "02" + _fixed("metadata nonce", 11),
        "summary_nonce": "03" + _fixed("summary nonce", 11),
        "summary": "text; begins: frozen line 00000: résumé …",
        "retained": {"source": "frozen vector ✓"},
        "plaintext": _plaintext(),
    }


def outputs(given: dict) -> dict:
    """Every output, computed with the code of keys/ and vault/row/: name -> {"how", "expect"}."""
    raw = {k: bytes.fromhex(given[k]) for k in ("owner_key", "data_key", "index_key", "vault_id", "row_id")}
    version, user_id, turn_id = given["key_version"], given["user_id"], given["turn_id"]
    index, keyset, data_key = IndexKey(raw["index_key"]), OwnerKeyset(version, {version: raw["owner_key"]}), \
        DataKey(raw["data_key"])
    ctx = RowContext(raw["vault_id"], raw["row_id"])
    chunks = list(chunked(text_pieces(given["plaintext"]), text=True, max_chunks=MAX_CHUNKS))
    size_bytes = sum(len(c.data) for c in chunks)
    owner_tag = index.owner_tag(user_id)
    turn_tag = index.turn_tag(owner_tag, turn_id)
    digest = context_digest(user_id, turn_id, given["step_num"], given["executor_name"], given["content_kind"])
    aads = {
        "wrap_aad": wrap_aad(ctx, user_id, version),
        "metadata_aad": meta_aad(ctx, owner_tag, turn_tag, given["expires_at"], size_bytes),
        "summary_aad": summary_aad(ctx, owner_tag, turn_tag, given["expires_at"], size_bytes),
        "chunk_aad": chunk_aad(ctx, digest),
    }
    metadata = _metadata_v1(metadata_of(given, chunks))
    summary = _summary_v1(SummaryRecord(given["step_num"], given["executor_name"], given["content_kind"],
                                        sum(c.units for c in chunks), given["created_at"], given["summary"],
                                        given["retained"]))
    vault_hex = raw["vault_id"].hex()
    result = {
        "owner_tag": ("HMAC-SHA256(index key, 'scratchvault/owner-tag/v1' | user_id)", owner_tag),
        "turn_tag": ("HMAC-SHA256(index key, 'scratchvault/turn-tag/v1' | owner tag | turn_id)", turn_tag),
        "index_key_check": ("meta 'index_key_check': IndexKey.commitment(vault_id)",
                            index.commitment(raw["vault_id"])),
        "owner_key_check": ("owner_keys.check_value of version 1: OwnerKeyset.commitment(1, vault_id)",
                            keyset.commitment(version, raw["vault_id"])),
        "context_digest": ("SHA-256 of the row's immutable context (envelope.context_digest)", digest),
        **{name: (f"envelope.{name.replace('metadata', 'meta')} of this row", value) for name, value in aads.items()},
        "wrapped_key": ("wrap nonce | AES-256-GCM(owner key v1, data key, wrap_aad)",
                        keyset._wrap_with_nonce(data_key, aads["wrap_aad"], bytes.fromhex(given["wrap_nonce"]))),
        "metadata_plaintext": ("Metadata.encode()", metadata),  # of format 1: see _metadata_v1
        "sealed_metadata": ("metadata nonce | AES-256-GCM(data key, metadata_plaintext, metadata_aad)",
                            data_key._seal_with_nonce(bytes.fromhex(given["metadata_nonce"]), metadata,
                                                      aads["metadata_aad"])),
        "summary_plaintext": ("SummaryRecord.encode()", summary),  # of format 1: see _summary_v1
        "sealed_summary": ("summary nonce | AES-256-GCM(data key, summary_plaintext, summary_aad)",
                           data_key._seal_with_nonce(bytes.fromhex(given["summary_nonce"]), summary,
                                                     aads["summary_aad"])),
    }
    for i, chunk in enumerate(chunks):
        result[f"chunk_{i}_nonce"] = (f"envelope.chunk_nonce({i}, last={chunk.last})", chunk_nonce(i, chunk.last))
        result[f"sealed_chunk_{i}"] = (f"DataKey.seal_chunk({i}, last={chunk.last}, chunk, chunk_aad)",
                                       data_key.seal_chunk(i, chunk.last, chunk.data, aads["chunk_aad"]))
    outs = {name: {"how": how, "expect": value.hex()} for name, (how, value) in result.items()}
    outs["size_bytes"] = {"how": "rows.size_bytes", "expect": size_bytes}
    outs["chunk_bytes"] = {"how": "plaintext bytes per chunk, as rowformat.chunked cuts the UTF-8 text",
                           "expect": [len(c.data) for c in chunks]}
    outs["chunk_units"] = {"how": "characters per chunk (metadata chunk_units)", "expect": [c.units for c in chunks]}
    outs["chunk_positions"] = {"how": "chunks.pos = seq << 20 | index",
                               "expect": [given["seq"] << 20 | i for i in range(len(chunks))]}
    outs["keyring_index_entry"] = {
        "how": "keyring entry (service, username, password) of the index key",
        "expect": [f"scratchvault/{vault_hex}/index", "index",
                   json.dumps({"format": "scratchvault-key/1", "key": base64.b64encode(raw["index_key"]).decode()})],
    }
    outs["keyring_owner_entry"] = {
        "how": "keyring entry (service, username = owner tag in hex, password) of the owner's keyset",
        "expect": [f"scratchvault/{vault_hex}/owner", owner_tag.hex(), keyset.serialize().reveal()],
    }
    return outs


def metadata_of(given: dict, chunks: list) -> Metadata:
    """The row's metadata record."""
    return Metadata(
        user_id=given["user_id"], actor=given["actor"], channel=given["channel"], turn_id=given["turn_id"],
        step_num=given["step_num"], executor_name=given["executor_name"], content_kind=given["content_kind"],
        size_bytes=sum(len(c.data) for c in chunks), size_units=sum(c.units for c in chunks),
        chunk_units=tuple(c.units for c in chunks), created_at=given["created_at"], expires_at=given["expires_at"],
    )


def inputs_v2() -> dict:
    """What format 2 adds to the v1 row's inputs: the nonces of its new metadata record and of its summary
    under the turn summary key."""
    return {"metadata_nonce": "02" + _fixed("metadata v2 nonce", 11), "summary_nonce": _fixed("summary v2 nonce", 12)}


def outputs_v2(given: dict, added: dict) -> dict:
    """The format 2 records of the same row: metadata (same key and AAD as v1), and the summary under the turn
    summary key, with its AAD."""
    raw = {k: bytes.fromhex(given[k]) for k in ("owner_key", "index_key", "vault_id", "row_id", "data_key")}
    version, user_id = given["key_version"], given["user_id"]
    index, keyset = IndexKey(raw["index_key"]), OwnerKeyset(version, {version: raw["owner_key"]})
    ctx = RowContext(raw["vault_id"], raw["row_id"])
    chunks = list(chunked(text_pieces(given["plaintext"]), text=True, max_chunks=MAX_CHUNKS))
    size_bytes = sum(len(c.data) for c in chunks)
    owner_tag = index.owner_tag(user_id)
    turn_tag = index.turn_tag(owner_tag, given["turn_id"])
    aad = summary_aad_v2(ctx, owner_tag, turn_tag, given["expires_at"], size_bytes, version)
    record = SummaryRecord(given["step_num"], given["executor_name"], given["content_kind"],
                           sum(c.units for c in chunks), given["created_at"], given["summary"], given["retained"])
    turn_key = keyset.turn_key(version, raw["vault_id"], turn_tag)
    metadata = metadata_of(given, chunks).encode()
    meta = meta_aad(ctx, owner_tag, turn_tag, given["expires_at"], size_bytes)
    result = {
        "metadata_plaintext": ("Metadata.encode() (format 2, binary)", metadata),
        "sealed_metadata": ("metadata nonce | AES-256-GCM(data key, metadata_plaintext, metadata_aad of v1)",
                            DataKey(raw["data_key"])._seal_with_nonce(bytes.fromhex(added["metadata_nonce"]),
                                                                      metadata, meta)),
        "summary_aad": ("envelope.summary_aad_v2 of this row", aad),
        "summary_plaintext": ("SummaryRecord.encode() (format 2, binary)", record.encode()),
        "sealed_summary": ("0x04 | nonce | AES-256-GCM(turn summary key of (owner key v1, vault id, turn tag), "
                           "summary_plaintext, summary_aad)",
                           turn_key._seal_with_nonce(bytes.fromhex(added["summary_nonce"]), record.encode(), aad)),
    }
    return {name: {"how": how, "expect": value.hex()} for name, (how, value) in result.items()}


def document() -> str:
    given = inputs()
    return json.dumps({
        "source": "scratchvault row format v1, generated by tests/vectors/make_row_vectors.py (run by hand); "
                  "bytes are hex; see tests/vectors/README.md",
        "format_version": 1,
        "inputs": given,
        "outputs": outputs(given),
    }, indent=1, ensure_ascii=False) + "\n"


def document_v2() -> str:
    given, added = inputs(), inputs_v2()
    return json.dumps({
        "source": "scratchvault row format v2: the metadata and summary records of the row of row_format_v1.json "
                  "(same inputs) as format 2 writes them; everything else is as in v1. Generated by "
                  "tests/vectors/make_row_vectors.py (run by hand); bytes are hex; see tests/vectors/README.md",
        "format_version": 2,
        "inputs": added,
        "outputs": outputs_v2(given, added),
    }, indent=1, ensure_ascii=False) + "\n"


def main() -> int:
    documents = {OUT: document(), OUT_V2: document_v2()}
    if sys.argv[1:] == ["--check"]:
        return 0 if all(path.exists() and path.read_text(encoding="utf-8") == text
                        for path, text in documents.items()) else 1
    for path, text in documents.items():
        path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
