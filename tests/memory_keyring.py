"""The in-memory test keyring (it lives in keys/testing.py so the benchmark can use it too)."""

from keys.testing import MemoryKeyring

__all__ = ["MemoryKeyring"]
