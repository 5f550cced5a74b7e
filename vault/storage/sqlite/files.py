"""A SQLite vault file read or copied without opening it as a vault: doctor's findings, its vault id, a backup."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from keys import EPOCH_WRAPPED_SIZE
from vault.errors import UnsafeStorage, VaultError
from vault.storage.base import Finding
from vault.storage.epoch_report import LIVE, NO_EPOCH, UNSWEPT, epoch_findings
from vault.storage.sql import values
from vault.storage.sqlite import paths, schema, space
from vault.storage.sqlite.connections import TRANSLATE, configure, durability, file_uri


def describe(path: Path, now: float) -> list[Finding]:
    """Findings about the file at ``path``: permissions, free space, schema version, vault id, counts, SQLite's
    quick_check."""
    found = [Finding("", f"database: {path}")]
    if not path.exists():
        return [*found, Finding("FAIL", "no database at that path (nothing else to check)")]
    try:
        paths.check_path_safety(path)
        found.append(Finding("ok", "permissions: database, -wal, -shm, -ballast, lock files and directories are "
                                   "private to this account"))
    except VaultError as error:
        found.append(Finding("FAIL", f"permissions: {error}"))
    found += space.findings(path)
    try:
        with _read_only(path) as connection:
            return found + _durability(connection) + _facts(connection, now)
    except VaultError as error:
        return [*found, Finding("FAIL", f"database: {error}")]


def vault_id_at(path: Path) -> bytes | None:
    """The vault id stored in the file at ``path``, or None (no vault there, e.g. left by a put that failed)."""
    with _read_only(path) as connection, TRANSLATE:
        if connection.execute("PRAGMA user_version").fetchone()[0] == 0:
            return None
        found = connection.execute("SELECT value FROM meta WHERE name = 'vault_id'").fetchone()
    return None if found is None else values.blob(found[0])


def backup(path: Path, target: Path) -> None:
    """A consistent copy of the live database at ``target``, a new file made 0600 before anything is copied into
    it, as a backup job would make it."""
    try:
        os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
    except OSError as error:
        raise UnsafeStorage(f"cannot make the backup file ({error.strerror or type(error).__name__})") from None
    with _read_only(path) as source, TRANSLATE:
        copy = sqlite3.connect(target)
        try:
            source.backup(copy)
        finally:
            copy.close()


def _durability(connection: sqlite3.Connection) -> list[Finding]:
    """The settings the store's connections run with, read back from one configured as they are: WAL (kept in the
    file), synchronous FULL or EXTRA (a returned put survives power loss), secure_delete ON (deletes zeroed)."""
    with TRANSLATE:
        if connection.execute("PRAGMA user_version").fetchone()[0] == 0:
            return []  # no vault here: _facts says so
        configure(connection, keep_journal_mode=True)  # read-only: the file's mode is read, not set
        mode, synchronous, secure_delete = durability(connection)
    names = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
    text = f"journal_mode {mode}, synchronous {names.get(synchronous, synchronous)}, secure_delete " + (
        {0: "OFF", 1: "ON", 2: "FAST"}.get(secure_delete, str(secure_delete)))
    durable = mode == "wal" and synchronous in (2, 3) and secure_delete == 1
    return [Finding("ok" if durable else "FAIL", text + ("" if durable else ": a put can be lost on power loss, "
                                                       "or a deleted row's pages left unzeroed"))]


def _facts(connection: sqlite3.Connection, now: float) -> list[Finding]:
    version = connection.execute("PRAGMA user_version").fetchone()[0]
    if version == 0:  # every file a scratchvault made has its schema version set in the transaction that made it
        return [Finding("FAIL", "database: not a scratchvault database (SQLite, but no schema version)")]
    if version > schema.SCHEMA_VERSION:
        return [Finding("FAIL", f"schema version {version}, this scratchvault reads up to {schema.SCHEMA_VERSION}")]
    later = "" if version == schema.SCHEMA_VERSION else (
        f" (raised to {schema.SCHEMA_VERSION} when this scratchvault next opens it)")
    vault_id = connection.execute("SELECT value FROM meta WHERE name = 'vault_id'").fetchone()
    vault = values.blob(vault_id[0]).hex() if vault_id else None
    lookup = ("an index on row ids (a file made before schema 3: puts write one more page)"
              if schema.has_id_index(connection) else "the seq each row id names (no index on ids)")
    rows, size, expired = connection.execute(schema.COUNTS, (now,)).fetchone()
    owners = connection.execute("SELECT count(*) FROM owners").fetchone()[0]
    by_version = dict(connection.execute(
        "SELECT key_version, count(*) FROM rows GROUP BY key_version ORDER BY key_version").fetchall())
    foreign = schema.foreign_objects(connection)
    found = [Finding("ok", f"schema version {version}{later}, vault id {vault}"),
             Finding("", f"row lookup: {lookup}"),
             Finding("", f"rows {rows:,} ({size:,} bytes), expired awaiting gc {expired:,}, owners {owners:,}, "
                         f"rows by key version {by_version}")]
    found += epoch_findings(connection.execute(NO_EPOCH.format(length="length", size="?"),
                                               (EPOCH_WRAPPED_SIZE,)).fetchone()[0],
                            connection.execute(LIVE).fetchall(),
                            connection.execute(UNSWEPT.format(false="0")).fetchone()[0], now)
    unswept = _unswept_tombstones(connection)
    if unswept:
        found.append(Finding("WARN", f"{unswept:,} destroyed key version(s) whose keyring entries are not yet known "
                                     "deleted (a shred or retirement met a keyring failure): run it again"))
    if foreign:
        found.append(Finding("FAIL", f"schema objects scratchvault did not make: {', '.join(foreign)} (a trigger or "
                                     "view can keep or copy deleted rows; the vault refuses this file)"))
    check = connection.execute("PRAGMA quick_check").fetchone()[0]
    if check != "ok":
        found.append(Finding("FAIL", f"SQLite quick_check: {check}"))
    return found


def _unswept_tombstones(connection: sqlite3.Connection) -> int:
    """Tombstoned key versions whose keyring entries were not yet deleted (none before schema 4)."""
    if not connection.execute("SELECT 1 FROM sqlite_master WHERE name = 'key_tombstones'").fetchone():
        return 0
    return connection.execute("SELECT count(*) FROM key_tombstones WHERE swept = 0").fetchone()[0]


@contextmanager
def _read_only(path: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection to ``path``, sqlite3 errors translated, closed on exit."""
    with TRANSLATE:
        connection = sqlite3.connect(file_uri(path, "ro"), uri=True, timeout=5.0)
        try:
            yield connection
        finally:
            connection.close()
