"""Generate tests/vectors/deletion_ledger_v1.json: frozen known-answer vectors of the deletion ledger (keys/ledger.py,
threat_model.md "Rollback") and of the keyring entry that counts an owner's deletes.

Run by hand, once per format version, from the repository root::

    python -m tests.vectors.make_ledger_vectors            # writes the file
    python -m tests.vectors.make_ledger_vectors --check    # exit 1 if the file differs from what it would write

Independent of the code under test: every value is computed here from the documented construction with
``hashlib``, ``hmac`` and ``struct`` only (nothing of ``keys/`` or ``vault/`` is imported), so the test, which
recomputes them through ``keys/``, compares two implementations. Regenerating the file to make that test pass
defeats its purpose: a difference means the ledger format changed, and ledgers already on disk would no longer
verify (every delete and extend_turn of their owners would be refused).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import struct
import sys
from pathlib import Path

OUT = Path(__file__).with_name("deletion_ledger_v1.json")


def _fixed(label: str, size: int) -> str:
    """A fixed, random-looking value (hex) derived from a label."""
    return hashlib.sha256(b"scratchvault deletion ledger v1 vector/" + label.encode()).digest()[:size].hex()


def fields(label: bytes, *parts: bytes) -> bytes:
    """``label || (4-byte big-endian length || part)*``, the encoding of every MAC and AAD input."""
    return label + b"".join(struct.pack(">I", len(part)) + part for part in parts)


def ledger_key(index_key: bytes) -> bytes:
    """HKDF-Expand (RFC 5869) of the index key, one block: HMAC(index key, info || 0x01)."""
    return hmac.new(index_key, b"scratchvault/deletion-ledger-key/v1\x01", hashlib.sha256).digest()


def owner_tag(index_key: bytes, user_id: str) -> bytes:
    """HMAC(index key, fields("scratchvault/owner-tag/v1", user id))."""
    return hmac.new(index_key, fields(b"scratchvault/owner-tag/v1", user_id.encode()), hashlib.sha256).digest()


def body(entries: list[tuple[bytes, float]]) -> bytes:
    """Entries sorted by row id, each ``row id (16 bytes) || expiry (IEEE double, big-endian)``."""
    return b"".join(row_id + struct.pack(">d", expiry) for row_id, expiry in sorted(entries))


def message(vault_id: bytes, tag_of_owner: bytes, counter: int, stored_body: bytes) -> bytes:
    """What the tag authenticates."""
    return fields(b"scratchvault/deletions/v1", vault_id, tag_of_owner, struct.pack(">Q", counter), stored_body)


def ledger_tag(index_key: bytes, vault_id: bytes, tag_of_owner: bytes, counter: int, stored_body: bytes) -> bytes:
    """HMAC-SHA256(ledger key, message)."""
    return hmac.new(ledger_key(index_key), message(vault_id, tag_of_owner, counter, stored_body),
                    hashlib.sha256).digest()


def inputs() -> dict:
    """Every input, JSON-ready (bytes in hex); entries deliberately not in row id order."""
    return {
        "index_key": _fixed("index key", 32),
        "vault_id": _fixed("vault id", 16),
        "user_id": "alice-é",
        "counter": 3,
        "entries": [{"row_id": _fixed(f"row id {n}", 16), "expires_at": 1_800_003_600.25 + n * 60.5}
                    for n in (2, 0, 1)],
    }


def outputs(given: dict) -> dict:
    """Every output: name -> {"how", "expect"}."""
    index_key, vault_id = bytes.fromhex(given["index_key"]), bytes.fromhex(given["vault_id"])
    entries = [(bytes.fromhex(e["row_id"]), e["expires_at"]) for e in given["entries"]]
    tag_of_owner = owner_tag(index_key, given["user_id"])
    stored = body(entries)
    counter = given["counter"]
    return {
        "ledger_key": {"how": "HMAC-SHA256(index_key, 'scratchvault/deletion-ledger-key/v1' || 0x01)",
                       "expect": ledger_key(index_key).hex()},
        "owner_tag": {"how": "HMAC-SHA256(index_key, fields('scratchvault/owner-tag/v1', user_id))",
                      "expect": tag_of_owner.hex()},
        "body": {"how": "entries sorted by row_id, each row_id || big-endian IEEE double expires_at",
                 "expect": stored.hex()},
        "message": {"how": "fields('scratchvault/deletions/v1', vault_id, owner_tag, counter as 8 bytes, body)",
                    "expect": message(vault_id, tag_of_owner, counter, stored).hex()},
        "tag": {"how": "HMAC-SHA256(ledger_key, message)",
                "expect": ledger_tag(index_key, vault_id, tag_of_owner, counter, stored).hex()},
        "keyring_entry": {"how": "service scratchvault/<vault_id hex>/deletions, user <owner_tag hex>, the counter "
                                 "in decimal",
                          "expect": [f"scratchvault/{vault_id.hex()}/deletions", tag_of_owner.hex(), str(counter)]},
    }


def document() -> str:
    """The file's text."""
    given = inputs()
    return json.dumps({"format": "scratchvault deletion ledger v1", "fields": "fields(label, *parts) = label || "
                       "(uint32 big-endian length || part)*", "inputs": given, "outputs": outputs(given)},
                      indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    text = document()
    if "--check" in argv:
        return 0 if OUT.read_text(encoding="utf-8") == text else 1
    OUT.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
