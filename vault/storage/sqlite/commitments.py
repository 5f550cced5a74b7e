"""The SQLite store's side of the key bookkeeping written once in vault/storage/sql/ (``keys.KeyCommitments`` and
``keys.commitments.EpochRecords``): statements on this thread's connection, every write under the file's one writer
lock (joining the transaction the thread has open), the schema checked on the tables a destruction changes before
it commits, and destructions that make room on a full file system (store.deleting)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import NoReturn, Protocol, TypeVar

from vault.errors import IntegrityError, StorageError
from vault.storage.sql import KeyRecords
from vault.storage.sql.dialect import SQLITE
from vault.storage.sql.session import Params, Session
from vault.storage.sql.values import key_version
from vault.storage.sqlite.schema import check_schema
from vault.storage.sqlite.writes import SqliteWriteTx

T = TypeVar("T")


class SqliteFile(Protocol):
    """What the key bookkeeping uses of the SQLite store (SqliteStore): statements on this thread's connection,
    the writer lock, and removal that makes room on a full file system."""

    def query(self, sql: str, parameters: tuple | Mapping[str, object] = ()) -> list[tuple]: ...

    def within(self, work: Callable[[sqlite3.Connection], T]) -> T: ...

    def in_transaction(self) -> bool: ...

    def transaction(self) -> SqliteWriteTx: ...

    def deleting(self, work: Callable[[SqliteWriteTx], T]) -> T: ...

    def get_meta(self, name: str) -> bytes | None: ...


class _Session:
    """Statements on the connection of one write transaction (the file's writer lock held)."""

    __slots__ = ("_connection",)

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    def run(self, statement: str, params: Params) -> None:
        self._connection.execute(statement, params)

    def one(self, statement: str, params: Params) -> tuple | None:
        return self._connection.execute(statement, params).fetchone()

    def all(self, statement: str, params: Params) -> list[tuple]:
        return self._connection.execute(statement, params).fetchall()

    def refuse(self, message: str) -> NoReturn:
        raise IntegrityError(message)

    def check_tables_before_commit(self, tables: frozenset[str]) -> None:
        """Checked now: the writer lock is held, so nothing changes the schema until the transaction ends."""
        check_schema(self._connection, tables)


class SqliteKeyStore:
    """vault.storage.sql.session.KeyStore on one SQLite file."""

    __slots__ = ("_store",)
    dialect = SQLITE

    def __init__(self, store: SqliteFile) -> None:
        self._store = store

    def read(self, statement: str, params: Params) -> list[tuple]:
        return self._store.query(statement, params)

    def write(self, work: Callable[[Session], T], owner_tag: bytes | None = None) -> T:
        return self._store.within(lambda connection: work(_Session(connection)))

    def reserve(self, work: Callable[[Session], T], owner_tag: bytes | None = None) -> T:
        if self._store.in_transaction():
            raise StorageError("a key version or epoch attempt cannot be reserved inside another write transaction")
        with self._store.transaction() as tx:
            return work(_Session(tx.connection))

    def remove(self, work: Callable[[Session], T]) -> T:
        if self._store.in_transaction():  # joined (a first key's sweep, under the writer lock)
            return self.write(work)
        return self._store.deleting(lambda tx: work(_Session(tx.connection)))

    def locked(self) -> AbstractContextManager[object]:
        return self._store.transaction()

    def count_versions_in_use(self, owner_tag: bytes) -> dict[int, int]:
        found = self._store.query("SELECT key_version, count(*) FROM rows WHERE owner_tag = ? GROUP BY key_version",
                                  (owner_tag,))
        return {key_version(version): count for version, count in found}

    def meta(self, name: str) -> bytes | None:
        return self._store.get_meta(name)


class SqliteCommitments(KeyRecords):
    """The key bookkeeping of one SQLite file."""

    __slots__ = ()

    def __init__(self, store: SqliteFile) -> None:
        super().__init__(SqliteKeyStore(store))
