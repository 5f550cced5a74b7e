"""The unambiguous field encoding of every AAD, derivation info and MAC message: ``label || (len32 || field)*``.

Each field has a 4-byte big-endian length prefix, so no two different lists of fields serialise to the same bytes.
"""

from __future__ import annotations

import struct

_LENGTH = struct.Struct(">I").pack
u32 = struct.Struct(">I").pack
u64 = struct.Struct(">Q").pack


def encode_fields(label: bytes, *fields: bytes) -> bytes:
    """``label || (len32 || field)*``."""
    parts = [label]
    for field in fields:
        parts.append(_LENGTH(len(field)))
        parts.append(field)
    return b"".join(parts)
