"""Shared fixtures: an in-memory keyring, a controllable clock, vaults in private temp directories, and the
attacker's handle on a vault's file (the SQLite store's: tests/attacks/sqlite_attacker.py).

Tests marked ``real_keyring`` use the OS keyring's Secret Service; ``scripts/run test`` starts one and sets
SCRATCHVAULT_REAL_KEYRING=1, in which case its absence is a failure, never a skip.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from keys.testing import MemoryKeyring
from tests.support.clock import FakeClock
from tests.support.pg_local import pg_schemas  # noqa: F401  (a fixture)
from vault import Principal, Vault

if TYPE_CHECKING:
    from tests.attacks.sqlite_attacker import SqliteAttacker

# helpers whose asserts are the tests' own: rewritten like a test module's, for the same failure messages
pytest.register_assert_rewrite("tests.attacks.sqlite_attacker", "tests.attacks.tamper_world", "tests.storage.contract",
                              "tests.system.crash_campaign", "tests.system.crash_ops")


@pytest.fixture
def keyring_backend() -> MemoryKeyring:
    return MemoryKeyring()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def vault_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "vault"
    directory.mkdir(mode=0o700)
    return directory


# SCRATCHVAULT_TEST_STORE=postgres runs the vault-level suites against PostgreSQL: ``db_path`` is then a URL
STORE = os.environ.get("SCRATCHVAULT_TEST_STORE", "sqlite")


@pytest.fixture
def db_path(vault_dir: Path, request: pytest.FixtureRequest) -> Path:
    if STORE == "postgres":
        return request.getfixturevalue("pg_schemas")("vault")
    return vault_dir / "scratchpad.db"


@pytest.fixture
def vault(db_path: Path, keyring_backend: MemoryKeyring, clock: FakeClock) -> Iterator[Vault]:
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as opened:
        yield opened


@pytest.fixture(scope="session")
def attacker_for() -> type[SqliteAttacker]:
    """The attacker of the store under test, made for a database path: the one place that picks the backend's
    attacker (another store's suite supplies its own, with the same operations)."""
    from tests.attacks.sqlite_attacker import SqliteAttacker

    return SqliteAttacker


@pytest.fixture
def attacker(attacker_for: type[SqliteAttacker], db_path: Path) -> SqliteAttacker:
    """The attacker's handle on the file of the ``vault`` fixture."""
    return attacker_for(db_path)


@pytest.fixture
def alice() -> Principal:
    return Principal("alice", actor="planner", channel="web")


@pytest.fixture
def bob() -> Principal:
    return Principal("bob", actor="planner", channel="web")


def real_keyring_required() -> bool:
    return os.environ.get("SCRATCHVAULT_REAL_KEYRING") == "1"


@pytest.fixture
def real_keyring():
    """The OS keyring's Secret Service backend; fails (not skips) when the test command promised one."""
    try:
        from keyring.backends import SecretService

        backend = SecretService.Keyring()
        if backend.priority < 1:
            raise RuntimeError("Secret Service priority < 1")
    except Exception as error:  # any reason it is unusable
        if real_keyring_required():
            pytest.fail(f"SCRATCHVAULT_REAL_KEYRING=1 but the Secret Service is unusable: {error!r}")
        pytest.skip(f"no Secret Service here ({error!r}); run through 'bash scripts/run test'")
    return backend
