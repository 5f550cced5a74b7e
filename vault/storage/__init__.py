"""Storage behind one contract (``base.py``); the SQLite store in ``sqlite/``.

``open_store`` is how the vault gets a store for a location; ``describe``, ``vault_id_at`` and ``backup`` read a
location without opening it as a vault (doctor, the command line, the demo).
"""

from __future__ import annotations

import time
from pathlib import Path

from vault.storage.base import Finding, ListedRow, Snapshot, Store, StoredRow, WriteTx
from vault.storage.sqlite import SqliteStore, default_path, prepare
from vault.storage.sqlite import backup as backup_sqlite
from vault.storage.sqlite import describe as describe_sqlite
from vault.storage.sqlite import vault_id_at as sqlite_vault_id

__all__ = [
    "Finding",
    "ListedRow",
    "Snapshot",
    "Store",
    "StoredRow",
    "WriteTx",
    "backup",
    "default_location",
    "describe",
    "open_store",
    "vault_id_at",
]


def default_location() -> Path:
    """Where a vault lives when no location is given: the SQLite file in the user's data directory."""
    return default_path()


def open_store(location: object, disk_reserve_bytes: int | None = None) -> Store:
    """The store at ``location`` (a path: SQLite, created private if new; checked for unsafe permissions), keeping
    ``disk_reserve_bytes`` free on its file system (None: the default for that file system; 0: no reserve)."""
    return SqliteStore(prepare(location), disk_reserve_bytes)


def describe(location: Path, now: float | None = None) -> list[Finding]:
    """What doctor reports of the database at ``location``, without keys and without changing it."""
    return describe_sqlite(location, time.time() if now is None else now)


def vault_id_at(location: Path) -> bytes | None:
    """The vault id stored at ``location``, or None when no vault is there."""
    return sqlite_vault_id(location)


def backup(location: Path, target: Path) -> None:
    """A consistent copy of the database at ``location`` made at ``target``, as a backup job would make one."""
    backup_sqlite(location, target)
