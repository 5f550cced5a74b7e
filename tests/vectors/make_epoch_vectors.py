"""Generate tests/vectors/epoch_keys_v1.json: frozen known-answer vectors of expiry epochs (keys/epochs/;
threat_model.md, "Expiry epochs"): epoch numbers of expiries on and around boundaries, the combined PRK, the wrap
and summary keys, the epoch key's commitment and its keyring entry name.

Run by hand, once per construction version, from the repository root::

    python -m tests.vectors.make_epoch_vectors            # writes the file
    python -m tests.vectors.make_epoch_vectors --check    # exit 1 if the file differs from what it would write

Independent of the code under test: every value is computed here from the documented construction with
``hashlib``, ``hmac``, ``struct`` and ``fractions`` only (nothing of ``keys/`` or ``vault/`` is imported), and
tests/keys/test_epoch_vectors.py recomputes them through ``keys/`` and again through the ``cryptography`` package's
own HKDF classes. Regenerating the file to make that test pass defeats its purpose: a difference means the
derivation changed, and every row sealed under an epoch would stop opening.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import struct
import sys
from fractions import Fraction
from pathlib import Path

OUT = Path(__file__).with_name("epoch_keys_v1.json")
SALT = b"scratchvault/epoch-combiner/v1"


def _fixed(label: str, size: int) -> str:
    """A fixed, random-looking value (hex) derived from a label."""
    return hashlib.sha256(b"scratchvault epoch keys v1 vector/" + label.encode()).digest()[:size].hex()


def fields(label: bytes, *parts: bytes) -> bytes:
    """``label || (4-byte big-endian length || part)*``."""
    return label + b"".join(struct.pack(">I", len(part)) + part for part in parts)


def epoch(expires_at: float, length: int) -> int:
    """floor(expires_at / length), exactly (a Fraction holds the double's exact value)."""
    return int(Fraction(expires_at) // length)


def prk(owner_key: bytes, epoch_key: bytes) -> bytes:
    """HKDF-Extract (RFC 5869): HMAC-SHA256(salt, owner key || epoch key)."""
    return hmac.new(SALT, owner_key + epoch_key, hashlib.sha256).digest()


def expand(key: bytes, info: bytes) -> bytes:
    """HKDF-Expand (RFC 5869) of 32 bytes: one block, HMAC-SHA256(key, info || 0x01)."""
    return hmac.new(key, info + b"\x01", hashlib.sha256).digest()


def wrap_info(vault_id: bytes, owner_tag: bytes, version: int, length: int, number: int) -> bytes:
    return fields(b"scratchvault/epoch-wrap/v1", vault_id, owner_tag, struct.pack(">I", version),
                  struct.pack(">Q", length), struct.pack(">Q", number))


def summary_info(vault_id: bytes, version: int, turn_tag: bytes, length: int, number: int) -> bytes:
    return fields(b"scratchvault/epoch-summary/v1", vault_id, struct.pack(">I", version), turn_tag,
                  struct.pack(">Q", length), struct.pack(">Q", number))


def commitment(epoch_key: bytes, vault_id: bytes, length: int, number: int) -> bytes:
    message = fields(b"scratchvault/epoch-key-check/v1", vault_id, struct.pack(">Q", length), struct.pack(">Q", number))
    return hmac.new(expand(epoch_key, b"scratchvault/epoch-check-key/v1"), message, hashlib.sha256).digest()


def inputs() -> dict:
    """Every input, JSON-ready (bytes in hex)."""
    boundary = 500_000 * 3600.0  # 1,800,000,000: an hour boundary
    return {
        "owner_key": _fixed("owner key", 32), "epoch_key": _fixed("epoch key", 32),
        "vault_id": _fixed("vault id", 16), "owner_tag": _fixed("owner tag", 32), "turn_tag": _fixed("turn tag", 32),
        "version": 3, "length": 3600, "skew": 300, "attempt": 1,
        "expiries": [boundary - 1, boundary - 2**-22, boundary, boundary + 2**-22, boundary + 1, boundary + 3599.5],
        "other_lengths": [60, 900, 86400],
    }


def outputs(given: dict) -> dict:
    """Every output: name -> {"how", "expect"}."""
    owner_key, epoch_key = bytes.fromhex(given["owner_key"]), bytes.fromhex(given["epoch_key"])
    vault_id, owner_tag = bytes.fromhex(given["vault_id"]), bytes.fromhex(given["owner_tag"])
    turn_tag, version, length = bytes.fromhex(given["turn_tag"]), given["version"], given["length"]
    number = epoch(given["expiries"][2], length)
    key = prk(owner_key, epoch_key)
    return {
        "epochs": {"how": "floor(expires_at / length) for each expiry (length 3600), then for the expiry on the "
                          "boundary under each of other_lengths",
                   "expect": [epoch(t, length) for t in given["expiries"]]
                   + [epoch(given["expiries"][2], other) for other in given["other_lengths"]]},
        "epoch": {"how": "the epoch of expiries[2] (on a boundary: the epoch that starts there)", "expect": number},
        "epoch_end": {"how": "(epoch + 1) * length", "expect": (number + 1) * length},
        "destroy_after": {"how": "(epoch + 1) * length + skew", "expect": (number + 1) * length + given["skew"]},
        "prk": {"how": "HMAC-SHA256('scratchvault/epoch-combiner/v1', owner_key || epoch_key)",
                "expect": key.hex()},
        "wrap_info": {"how": "fields('scratchvault/epoch-wrap/v1', vault_id, owner_tag, version u32, length u64, "
                             "epoch u64)", "expect": wrap_info(vault_id, owner_tag, version, length, number).hex()},
        "wrap_key": {"how": "HMAC-SHA256(prk, wrap_info || 0x01)",
                     "expect": expand(key, wrap_info(vault_id, owner_tag, version, length, number)).hex()},
        "summary_info": {"how": "fields('scratchvault/epoch-summary/v1', vault_id, version u32, turn_tag, length u64, "
                                "epoch u64)",
                         "expect": summary_info(vault_id, version, turn_tag, length, number).hex()},
        "summary_key": {"how": "HMAC-SHA256(prk, summary_info || 0x01)",
                        "expect": expand(key, summary_info(vault_id, version, turn_tag, length, number)).hex()},
        "commitment": {"how": "HMAC-SHA256(HMAC-SHA256(epoch_key, 'scratchvault/epoch-check-key/v1' || 0x01), "
                              "fields('scratchvault/epoch-key-check/v1', vault_id, length u64, epoch u64))",
                       "expect": commitment(epoch_key, vault_id, length, number).hex()},
        "keyring_entry": {"how": "service scratchvault/<vault_id hex>/epoch-key, user <length>.<epoch>.<attempt>",
                          "expect": [f"scratchvault/{vault_id.hex()}/epoch-key",
                                     f"{length}.{number}.{given['attempt']}"]},
    }


def document() -> str:
    """The file's text."""
    given = inputs()
    return json.dumps({"format": "scratchvault expiry epochs v1", "fields": "fields(label, *parts) = label || "
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
