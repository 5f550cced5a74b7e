"""The in-memory keyring: the trial keyring (``Vault.open(..., keyring_backend="memory")``) and the tests' backend.

It defines no ``priority``, so keyring can never auto-select it, even when ``PYTHON_KEYRING_BACKEND`` names it:
it is used only when chosen by name or passed as an instance. The trial keyring is one per process: vaults this
process opens share it (a vault closed and opened again still reads its rows), and its secrets die with the
process, so every row stored under it is unreadable once the process exits.
"""

from __future__ import annotations

import threading

from keyring.backend import KeyringBackend
from keyring.errors import PasswordDeleteError

TRIAL = "memory"  # the one name Vault.open takes for keyring_backend, besides a backend instance
TRIAL_WARNING = ("keyring_backend='memory' is a trial keyring: its keys live in this process only and die with "
                 "this process, and with them every row stored; for trials and tests, never for data you keep")


class TrialKeyringWarning(UserWarning):
    """Issued each time a vault opens with the trial keyring: its keys (and so its rows) die with the process."""


class MemoryKeyring(KeyringBackend):
    """Secrets in a dict, shared by every Vault given this instance; ``reads`` counts get_password calls."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # keyring's KeyringBackend.__init__ is unannotated
        self.secrets: dict[tuple[str, str], str] = {}
        self.reads = 0

    def get_password(self, service: str, username: str) -> str | None:
        """The stored secret, or None."""
        self.reads += 1
        return self.secrets.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        """Store a secret."""
        self.secrets[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        """Delete a secret; PasswordDeleteError when absent, as real backends do."""
        if self.secrets.pop((service, username), None) is None:
            raise PasswordDeleteError("no such password")


_trial: list[MemoryKeyring] = []
_trial_lock = threading.Lock()


def trial_keyring() -> MemoryKeyring:
    """This process's trial keyring, made on first use."""
    with _trial_lock:
        if not _trial:
            _trial.append(MemoryKeyring())
        return _trial[0]
