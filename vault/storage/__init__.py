"""Storage behind one contract (``base.py``); the SQLite store in ``sqlite/``.

``open_store`` is how the vault gets a store for a location; ``describe``, ``vault_id_at`` and ``backup`` read a
location without opening it as a vault (doctor, the command line, the demo).
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from types import ModuleType

from vault.errors import InvalidArgument
from vault.inputs import check_int
from vault.storage.base import Finding, ListedRow, RowAt, RowKey, Snapshot, Store, StoredRow, WriteTx
from vault.storage.postgres import DEFAULT_POOL_SIZE, open_postgres
from vault.storage.postgres.connections import require_driver
from vault.storage.sqlite import SqliteStore, default_path, prepare
from vault.storage.sqlite import backup as backup_sqlite
from vault.storage.sqlite import describe as describe_sqlite
from vault.storage.sqlite import vault_id_at as sqlite_vault_id

POSTGRES_SCHEMES = frozenset({"postgresql", "postgres"})
_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")

__all__ = [
    "Finding",
    "ListedRow",
    "RowAt",
    "RowKey",
    "Snapshot",
    "Store",
    "StoredRow",
    "WriteTx",
    "backup",
    "default_location",
    "describe",
    "display_location",
    "open_store",
    "vault_id_at",
]


def default_location() -> Path:
    """Where a vault lives when no location is given: the SQLite file in the user's data directory."""
    return default_path()


def open_store(location: object, disk_reserve_bytes: int | None = None, pool_size: int | None = None) -> Store:
    """The store at ``location``: a ``postgresql://`` or ``postgres://`` URL opens PostgreSQL with a pool of
    ``pool_size`` connections (None: 8); a path opens SQLite (created private if new; checked for unsafe
    permissions), keeping ``disk_reserve_bytes`` free on its file system (None: the default for that file
    system; 0: no reserve). Any other URL is refused: a URL is never taken for a path (a mistyped
    ``postgresql://...`` would make a directory named ``postgresql:``)."""
    scheme = url_scheme(location)
    if pool_size is not None:
        check_int(pool_size, "pool_size", 1, 1000)
    if scheme in POSTGRES_SCHEMES:
        if disk_reserve_bytes is not None:
            raise InvalidArgument("disk_reserve_bytes is a setting of the SQLite store; a PostgreSQL server keeps "
                                  "its own disk")
        return open_postgres(str(location), DEFAULT_POOL_SIZE if pool_size is None else pool_size)
    if pool_size is not None:
        raise InvalidArgument("pool_size is a setting of the PostgreSQL store")
    if scheme is not None:
        raise InvalidArgument(f"a location with the URL scheme {scheme!r} is not a store this vault can open; give "
                              "a postgresql:// URL or a path to a SQLite file")
    return SqliteStore(prepare(location), disk_reserve_bytes)


def url_scheme(location: object) -> str | None:
    """The scheme of a location written as a URL (``scheme://...``), lower-cased, else None; the rest of the URL
    (which may hold a password) is never looked at or shown."""
    text = location if isinstance(location, str) else None
    match = _URL.match(text) if text is not None else None
    return match.group(1).lower() if match else None


def describe(location: str | Path, now: float | None = None) -> list[Finding]:
    """What doctor reports of the database at ``location`` (a path or a postgresql:// URL), without keys and
    without changing it."""
    now = time.time() if now is None else now
    if _postgres(location):
        return _postgres_describe().describe(str(location), now)
    return describe_sqlite(Path(location), now)


def vault_id_at(location: str | Path) -> bytes | None:
    """The vault id stored at ``location``, or None when no vault is there."""
    if _postgres(location):
        return _postgres_describe().vault_id_at(str(location))
    return sqlite_vault_id(Path(location))


def backup(location: str | Path, target: str | Path) -> None:
    """A consistent copy of the database at ``location`` made at ``target``, as a backup job would make one: a
    new file for a SQLite file, a schema without vault tables (a postgresql:// URL) for PostgreSQL."""
    if _postgres(location) != _postgres(target):
        raise InvalidArgument("a backup goes from a SQLite file to a new file, or from PostgreSQL to a "
                              "postgresql:// URL naming a schema without vault tables")
    if _postgres(location):
        require_driver()
        from vault.storage.postgres.copies import backup as backup_postgres

        backup_postgres(str(location), str(target))
        return
    backup_sqlite(Path(location), Path(target))


def display_location(location: str | Path) -> str:
    """How a location may be shown: a path as it is, a PostgreSQL URL without its password (nor anything but
    the role, host, port and database)."""
    if _postgres(location):
        return _postgres_describe().display(str(location))
    return str(location)


def _postgres(location: object) -> bool:
    """Whether ``location`` names PostgreSQL; any other URL is InvalidArgument (never taken for a path)."""
    scheme = url_scheme(location)
    if scheme is not None and scheme not in POSTGRES_SCHEMES:
        raise InvalidArgument(f"a location with the URL scheme {scheme!r} is not a store this vault can open; give "
                              "a postgresql:// URL or a path to a SQLite file")
    return scheme is not None


def _postgres_describe() -> ModuleType:
    """vault/storage/postgres/describe.py, imported when first needed (it needs the optional driver)."""
    require_driver()
    from vault.storage.postgres import describe

    return describe
