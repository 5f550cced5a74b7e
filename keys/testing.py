"""An in-memory KeyringBackend for tests and benchmarks; never for production.

It defines no ``priority``, so keyring can never auto-select it: it is used only when passed explicitly as
``Vault.open(keyring_backend=MemoryKeyring())``.
"""

from __future__ import annotations

from keyring.backend import KeyringBackend
from keyring.errors import PasswordDeleteError


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
