"""The in-memory KeyringBackend the tests and benchmarks pass as ``Vault.open(keyring_backend=MemoryKeyring())``;
never for production. It defines no ``priority``, so keyring can never auto-select it."""

from keys.keyring.memory import MemoryKeyring

__all__ = ["MemoryKeyring"]
