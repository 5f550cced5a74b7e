"""Shared fixtures: an in-memory keyring, a controllable clock, vaults in private temp directories.

Tests marked ``real_keyring`` use the OS keyring's Secret Service; ``scripts/run test`` starts one and sets
SCRATCHVAULT_REAL_KEYRING=1, in which case its absence is a failure, never a skip.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import closing
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


# The tables exactly as scratchvault made them before schema 3 (row ids random, found through an index on id).
SCHEMA_V2 = """
CREATE TABLE meta (name TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE rows (
    seq INTEGER PRIMARY KEY,
    id BLOB NOT NULL UNIQUE,
    owner_tag BLOB NOT NULL,
    turn_tag BLOB NOT NULL,
    key_version INTEGER NOT NULL,
    expires_at REAL NOT NULL,
    size_bytes INTEGER NOT NULL,
    wrapped_key BLOB NOT NULL,
    metadata BLOB NOT NULL
);
CREATE INDEX rows_owner_turn ON rows (owner_tag, turn_tag);
CREATE INDEX rows_expiry ON rows (expires_at);
CREATE TABLE summaries (seq INTEGER PRIMARY KEY, sealed BLOB NOT NULL);
CREATE TABLE chunks (pos INTEGER PRIMARY KEY, sealed BLOB NOT NULL);
CREATE TABLE owner_keys (
    owner_tag BLOB NOT NULL,
    version INTEGER NOT NULL,
    check_value BLOB NOT NULL,
    PRIMARY KEY (owner_tag, version)
) WITHOUT ROWID;
CREATE TABLE owners (owner_tag BLOB PRIMARY KEY, sealed_name BLOB NOT NULL) WITHOUT ROWID;
"""


def legacy_file(path: Path, user_version: int = 2) -> Path:
    """An empty database file laid out as before schema 3 (WAL, the v2 tables), for upgrade tests."""
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.executescript(SCHEMA_V2)
        conn.execute(f"PRAGMA user_version = {user_version}")
    os.chmod(path, 0o600)
    return path


def seq_of(db: Path, row_id: str) -> int:
    """The seq of the row storing ``row_id``, as a reader of the file sees it (no index consulted)."""
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute("SELECT seq FROM rows NOT INDEXED WHERE id = ?", (bytes.fromhex(row_id),)).fetchone()[0]


def table_counts(db: Path) -> tuple[int, ...]:
    """How many rows, summaries and chunks the file holds."""
    with closing(sqlite3.connect(db)) as conn:
        return tuple(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("rows", "summaries", "chunks"))


def user_version(db: Path) -> int:
    """The file's schema version."""
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute("PRAGMA user_version").fetchone()[0]
