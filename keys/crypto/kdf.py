"""HKDF-SHA256 (RFC 5869), the one key derivation of scratchvault, and the HMAC it is built on.

Every derived key is exactly one SHA-256 block (32 bytes), so ``expand`` is ``HMAC(PRK, info || 0x01)``. Where the
input key is already uniformly random (an owner key version, the index key, an epoch key) it serves as the PRK
directly; ``extract`` makes one PRK out of two keys (the epoch combiner).
"""

from __future__ import annotations

import hashlib
import hmac

KEY_BYTES = 32  # one HMAC-SHA256 block: every derived key


def mac(key: bytes, message: bytes) -> bytes:
    """HMAC-SHA256 of ``message`` under ``key``."""
    return hmac.new(key, message, hashlib.sha256).digest()


def extract(salt: bytes, input_key: bytes) -> bytes:
    """HKDF-Extract: the PRK of ``input_key`` under ``salt``."""
    return mac(salt, input_key)


def expand(prk: bytes, info: bytes) -> bytes:
    """HKDF-Expand of 32 bytes: one block, ``HMAC(PRK, info || 0x01)``."""
    return mac(prk, info + b"\x01")
