"""``scratchvault doctor``: is this installation safe to use? Checks the keyring backend, the database's
path and permissions, and reports the schema version and row counts. Needs no keys; changes nothing."""

from __future__ import annotations

import time
from pathlib import Path

from keys.errors import VaultError
from keys.keyring_store import resolve_backend
from vault import paths, store
from vault.store import SCHEMA_VERSION


def diagnose(path: Path | None) -> tuple[list[str], bool]:
    """Report lines and whether everything is safe."""
    lines: list[str] = []
    safe = True
    try:
        backend = resolve_backend(None)
        lines.append(f"ok    keyring backend: {type(backend).__module__}.{type(backend).__name__} "
                     f"(priority {backend.priority})")
    except VaultError as error:
        safe = False
        lines.append(f"FAIL  keyring backend: {error}")
    target = Path(path) if path is not None else paths.default_path()
    lines.append(f"      database: {target}")
    if not target.exists():
        return [*lines, "FAIL  no database at that path (nothing else to check)"], False
    try:
        paths.check_path_safety(target)
        lines.append("ok    permissions: database, -wal, -shm and directories are private to this account")
    except VaultError as error:
        safe = False
        lines.append(f"FAIL  permissions: {error}")
    try:
        facts = store.inspect(target, time.time())
    except VaultError as error:
        return [*lines, f"FAIL  database: {error}"], False
    version = facts["schema_version"]
    if version == 0:  # every file a scratchvault made has its schema version set in the transaction that made it
        return [*lines, "FAIL  database: not a scratchvault database (SQLite, but no schema version)"], False
    if version > SCHEMA_VERSION:
        safe = False
        lines.append(f"FAIL  schema version {version}, this scratchvault reads up to {SCHEMA_VERSION}")
        return lines, safe
    later = "" if version == SCHEMA_VERSION else f" (raised to {SCHEMA_VERSION} when this scratchvault next opens it)"
    lines.append(f"ok    schema version {version}{later}, vault id {facts['vault_id']}")
    lines.append("      row lookup: " + ("an index on row ids (a file made before schema 3: puts write one more page)"
                                         if facts["ids_indexed"] else "the seq each row id names (no index on ids)"))
    lines.append(f"      rows {facts['rows']:,} ({facts['bytes']:,} bytes), expired awaiting gc "
                 f"{facts['expired_rows']:,}, owners {facts['owners']:,}, rows by key version "
                 f"{facts['rows_by_key_version']}")
    if facts["integrity_check"] != "ok":
        safe = False
        lines.append(f"FAIL  SQLite quick_check: {facts['integrity_check']}")
    return lines, safe
