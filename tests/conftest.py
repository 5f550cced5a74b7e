"""Shared fixtures: an in-memory keyring, a controllable clock, vaults in private temp directories.

Tests marked ``real_keyring`` use the OS keyring's Secret Service; ``scripts/run test`` starts one and sets
SCRATCHVAULT_REAL_KEYRING=1, in which case its absence is a failure, never a skip.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from memory_keyring import MemoryKeyring

from vault import Principal, Vault

T0 = 1_800_000_000.0


class FakeClock:
    """A wall clock the test moves by hand (expiry is tested without sleeping)."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


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


@pytest.fixture
def db_path(vault_dir: Path) -> Path:
    return vault_dir / "scratchpad.db"


@pytest.fixture
def vault(db_path: Path, keyring_backend: MemoryKeyring, clock: FakeClock) -> Iterator[Vault]:
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as opened:
        yield opened


@pytest.fixture
def alice() -> Principal:
    return Principal("alice", actor="planner", channel="web")


@pytest.fixture
def bob() -> Principal:
    return Principal("bob", actor="planner", channel="web")


def owner_username(get_password, index_service: str, user_id: str) -> str:
    """The keyring user name of an owner's keyset: its owner tag in hex (it needs the vault's index key)."""
    from keys.blind_index import IndexKey
    from keys.keyset import parse_single_key

    index_key = IndexKey(parse_single_key(get_password(index_service, "index"), "index key"))
    return index_key.owner_tag(user_id).hex()


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
