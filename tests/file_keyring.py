"""A file-backed keyring for running the ``scratchvault`` command in a subprocess under test. Test-only.

Selected the way keyring itself selects a backend from the environment::

    PYTHONPATH=tests PYTHON_KEYRING_BACKEND=file_keyring.FileKeyring SCRATCHVAULT_TEST_KEYRING=/tmp/k.json

Secrets are kept in clear in a JSON file, which is why this module lives in tests/ and never in the package.
Its priority is 1 (the vault refuses auto-selected backends below 1), but only while SCRATCHVAULT_TEST_KEYRING
is set: in any other process it is not viable, so keyring can never pick it on its own.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from keyring.backend import KeyringBackend
from keyring.compat import properties
from keyring.errors import PasswordDeleteError

PATH_VARIABLE = "SCRATCHVAULT_TEST_KEYRING"


def load(path: Path) -> dict[str, str]:
    """The secrets in a keyring file, by ``service\\0username`` (tests read and damage it through this)."""
    return json.loads(path.read_text()) if path.exists() else {}


def save(path: Path, secrets: dict[str, str]) -> None:
    """Replace the keyring file atomically."""
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(secrets))
    temporary.replace(path)


class FileKeyring(KeyringBackend):
    """Secrets in the JSON file named by $SCRATCHVAULT_TEST_KEYRING."""

    @properties.classproperty
    def priority(cls) -> float:
        if not os.environ.get(PATH_VARIABLE):
            raise RuntimeError(f"test-only backend: {PATH_VARIABLE} is not set")
        return 1

    @property
    def _path(self) -> Path:
        return Path(os.environ[PATH_VARIABLE])

    def get_password(self, service: str, username: str) -> str | None:
        return load(self._path).get(f"{service}\0{username}")

    def set_password(self, service: str, username: str, password: str) -> None:
        secrets = load(self._path)
        secrets[f"{service}\0{username}"] = password
        save(self._path, secrets)

    def delete_password(self, service: str, username: str) -> None:
        secrets = load(self._path)
        if secrets.pop(f"{service}\0{username}", None) is None:
            raise PasswordDeleteError("no such password")
        save(self._path, secrets)
