"""One SQLite connection per thread, closed safely from any thread, and sqlite3 errors as VaultErrors.

SQLite runs in WAL mode (readers beside the one writer) with ``synchronous=FULL`` (a returned put survives power
loss) and ``secure_delete=ON`` (threat_model.md, "Deletion").
"""

from __future__ import annotations

import os
import sqlite3
import threading
import urllib.parse
from pathlib import Path

from vault.errors import IntegrityError, StorageError
from vault.storage.sqlite import paths

PRAGMAS = ("journal_mode = WAL", "synchronous = FULL", "secure_delete = ON", "foreign_keys = OFF",
           "trusted_schema = OFF", "busy_timeout = 30000")
_CORRUPT = ("malformed", "not a database", "corrupt", "file is encrypted")
_SQLITE_FULL = 13  # SQLite's primary result code for "database or disk is full" (ENOSPC on a write)


class FileSystemFull(StorageError):
    """SQLite could not write for want of space: the store's deletes answer it by releasing their ballast."""


def configure(connection: sqlite3.Connection, keep_journal_mode: bool = False) -> None:
    """Apply the settings every connection of the store runs with (doctor reads them back the same way, leaving
    the journal mode, a property of the file, as it finds it)."""
    for pragma in PRAGMAS:
        if not (keep_journal_mode and pragma.startswith("journal_mode")):
            connection.execute("PRAGMA " + pragma)


def durability(connection: sqlite3.Connection) -> tuple[str, int, int]:
    """(journal_mode, synchronous, secure_delete) as ``connection`` runs: wal, 2 (FULL) or 3 (EXTRA), 1 (ON)
    are what a returned put surviving power loss and zeroed deletes need."""
    read = connection.execute
    return (str(read("PRAGMA journal_mode").fetchone()[0]).lower(), int(read("PRAGMA synchronous").fetchone()[0]),
            int(read("PRAGMA secure_delete").fetchone()[0]))


def file_uri(path: Path, mode: str) -> str:
    """The URI SQLite opens ``path`` by (from its bytes: any valid file name), in ``mode`` (rw or ro)."""
    return "file:" + urllib.parse.quote(os.fsencode(path)) + "?mode=" + mode


class CheckedConnection(sqlite3.Connection):
    """A connection that remembers which of the vault's tables it found exactly as the vault made them, and at
    which schema cookie (schema.check_schema): SQLite reloads a connection's schema only when the cookie changes,
    so objects planted without changing it are never seen, nor run, by this connection's statements."""

    checked: tuple[int, frozenset[str]] = (-1, frozenset())


class Connections:
    """This thread's connection to one file, made on first use after checking the file is still the one opened.
    A connection is busy while used: ``close`` from another thread never closes one under a running statement
    (that crashes the sqlite3 module); a busy one closes itself when its last use ends."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._identity = paths.identity(path)  # every later connection must reach this same file
        self._uri = file_uri(path, "rw")
        self._busy: dict[sqlite3.Connection, int] = {}
        self._local = threading.local()
        self._open: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self.closed = False

    def _connection(self) -> sqlite3.Connection:
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            return connection
        with self._lock:
            if self.closed:
                raise StorageError("the vault is closed")
            paths.check_identity(self._path, self._identity)
            with TRANSLATE:
                connection = sqlite3.connect(self._uri, uri=True, timeout=30.0, isolation_level=None,
                                             check_same_thread=False, factory=CheckedConnection)
                configure(connection)
            self._open.append(connection)
        self._local.connection = connection
        return connection

    def acquire(self) -> sqlite3.Connection:
        """This thread's connection, marked busy until :meth:`release`."""
        connection = self._connection()
        with self._lock:
            if self.closed:
                raise StorageError("the vault is closed")
            self._busy[connection] = self._busy.get(connection, 0) + 1
        return connection

    def release(self, connection: sqlite3.Connection) -> None:
        """End one use of ``connection``; the last use after ``close`` closes it."""
        with self._lock:
            self._busy[connection] -= 1
            last = self._busy[connection] == 0
            if last:
                del self._busy[connection]
            orphaned = last and self.closed
        if orphaned:
            connection.close()

    def busy(self) -> bool:
        """Whether any connection is in use (a statement or transaction running)."""
        with self._lock:
            return bool(self._busy)

    def close(self) -> None:
        """Close every idle connection now and every busy one when its use ends; later uses raise StorageError."""
        with self._lock:
            self.closed = True
            idle = [connection for connection in self._open if connection not in self._busy]
            self._open = []
        for connection in idle:
            connection.close()


class _TranslateErrors:
    """sqlite3 errors become VaultError subclasses: corruption is IntegrityError, the rest StorageError (a class,
    not a generator: it wraps every statement)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, _trace: object) -> None:
        if error is None:
            return
        if isinstance(error, OverflowError):  # an integer SQLite cannot hold: only a damaged file has one
            raise IntegrityError("a stored value is out of range") from None
        if isinstance(error, sqlite3.Error):
            message = str(error)
            # a writer stored non-UTF-8 text where the vault reads text; SQLite's message quotes it: not ours
            if message.startswith("Could not decode to UTF-8"):
                raise IntegrityError("a stored column holds text that is not UTF-8") from None
            if isinstance(error, sqlite3.DatabaseError) and any(word in message for word in _CORRUPT):
                raise IntegrityError("the database file is corrupt (SQLite: " + message + ")") from None
            if (getattr(error, "sqlite_errorcode", None) or 0) & 0xFF == _SQLITE_FULL:
                raise FileSystemFull("the database's file system is full (SQLite: " + message + "); nothing was "
                                     "written. Run gc or delete rows, or free space on it") from None
            if "closed" in message:
                raise StorageError("the vault is closed") from None
            raise StorageError(f"database error ({type(error).__name__}: {message})") from None


TRANSLATE = _TranslateErrors()  # ``with TRANSLATE:`` around any statement
