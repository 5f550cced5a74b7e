"""A vault that stops being able to keep what it is given, for the adapters' fault tests: it is closed, or its
keyring goes down after the vault opened (every keyring call then raises, as a locked or vanished Secret Service
does). ``FAULTS`` maps each fault to the error type the library logs for it."""

from __future__ import annotations

from pathlib import Path

from keyring.backend import KeyringBackend

from keys.testing import MemoryKeyring
from tests.support.fault_counts import register
from vault import Vault

FAULTS = {"closed vault": "StorageError", "keyring down": "KeyUnavailable"}


class DownKeyring(MemoryKeyring):
    """A MemoryKeyring that raises on every call once ``down`` is set, counting them (a test in which it went down
    but was never called fails: tests/support/fault_counts.py)."""

    down = False

    def __init__(self) -> None:
        super().__init__()
        self.failed = 0
        register(self)

    def armed(self) -> bool:
        return self.down

    def fired(self) -> int:
        return self.failed

    def get_password(self, service: str, username: str) -> str | None:
        self._check()
        return super().get_password(service, username)

    def set_password(self, service: str, username: str, password: str) -> None:
        self._check()
        super().set_password(service, username, password)

    def _check(self) -> None:
        if self.down:
            self.failed += 1
            raise RuntimeError("backend down")


KeyringBackend._classes.discard(DownKeyring)  # never a candidate for keyring's auto-detection


class FaultyVault:
    """An open vault on a :class:`DownKeyring`; :meth:`strike` makes the fault (a key of FAULTS) happen now."""

    def __init__(self, db_path: Path, fault: str) -> None:
        if fault not in FAULTS:
            raise ValueError(f"fault must be one of {', '.join(FAULTS)}")
        self.fault, self.keyring = fault, DownKeyring()
        self.vault = Vault.open(db_path, keyring_backend=self.keyring)

    def strike(self) -> None:
        if self.fault == "closed vault":
            self.vault.close()
        else:
            self.keyring.down = True
