"""A keyring in a JSON file, for keys that cross a process boundary (the in-memory keyring cannot). Test-only.

Two ways in:

- in code, ``FileKeyring(path)``: the processes of one test share the file;
- by name, the way keyring itself selects a backend from the environment (the ``scratchvault`` command run as a
  subprocess, the previous release in the upgrade tests)::

      PYTHONPATH=<repository root> PYTHON_KEYRING_BACKEND=tests.support.file_keyring.FileKeyring \\
      SCRATCHVAULT_TEST_KEYRING=/tmp/k.json

Secrets are kept in clear, which is why this module lives in tests/ and never in the package; entries are keyed
``service\\0username``. Every write is a read-modify-write under an exclusive flock, so processes never lose each
other's entries. Its priority is 1 (the vault refuses auto-selected backends below 1), but only while
SCRATCHVAULT_TEST_KEYRING is set, and it is never a candidate for keyring's auto-detection.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from keyring.backend import KeyringBackend
from keyring.compat import properties
from keyring.errors import PasswordDeleteError

PATH_VARIABLE = "SCRATCHVAULT_TEST_KEYRING"


def entry(service: str, username: str) -> str:
    """The key of one secret in the file."""
    return f"{service}\0{username}"


def load(path: Path) -> dict[str, str]:
    """The secrets in a keyring file, by ``service\\0username`` (tests read and damage it through this)."""
    return json.loads(path.read_text()) if path.exists() else {}


def save(path: Path, secrets: dict[str, str]) -> None:
    """Replace the keyring file atomically."""
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(secrets))
    os.replace(temporary, path)


class FileKeyring(KeyringBackend):
    """Secrets in the JSON file ``path``, or the one named by $SCRATCHVAULT_TEST_KEYRING."""

    @properties.classproperty
    def priority(cls) -> float:
        if not os.environ.get(PATH_VARIABLE):
            raise RuntimeError(f"test-only backend: {PATH_VARIABLE} is not set")
        return 1

    def __init__(self, path: str | os.PathLike | None = None) -> None:
        super().__init__()
        self._fixed = None if path is None else Path(path)

    @property
    def path(self) -> Path:
        return self._fixed or Path(os.environ[PATH_VARIABLE])

    @contextmanager
    def _locked(self) -> Iterator[dict[str, str]]:
        with open(f"{self.path}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield load(self.path)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def get_password(self, service: str, username: str) -> str | None:
        with self._locked() as secrets:
            return secrets.get(entry(service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        with self._locked() as secrets:
            secrets[entry(service, username)] = password
            save(self.path, secrets)

    def delete_password(self, service: str, username: str) -> None:
        with self._locked() as secrets:
            if secrets.pop(entry(service, username), None) is None:
                raise PasswordDeleteError("no such password")
            save(self.path, secrets)


KeyringBackend._classes.discard(FileKeyring)  # selected only by name: never a candidate for auto-detection
