"""What a store gives the key bookkeeping written once (vault/storage/sql/): statements run on its connection, and
the transactions each kind of bookkeeping write needs, with the locks and checks of that store."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import NoReturn, Protocol, TypeVar

from vault.storage.sql.dialect import Dialect

T = TypeVar("T")
Params = Mapping[str, object]
ROW_TABLES = frozenset({"rows", "summaries", "chunks"})  # what deleting rows changes (and must stick on)


class Session(Protocol):
    """Statements inside one transaction of the store (rendered already: Dialect.render)."""

    def run(self, statement: str, params: Params) -> None:
        """A statement whose result nobody reads."""

    def one(self, statement: str, params: Params) -> tuple | None:
        """The first row a statement returns, or None."""

    def all(self, statement: str, params: Params) -> list[tuple]:
        """Every row a statement returns."""

    def refuse(self, message: str) -> NoReturn:
        """IntegrityError(``message``): the transaction rolls back, and a session that may itself be what was
        altered (PostgreSQL: a temporary relation of its own) is never used again."""

    def check_tables_before_commit(self, tables: frozenset[str]) -> None:
        """What this transaction writes to ``tables`` must stick: the catalog of those tables is checked to be
        exactly what the vault made before it commits (SQLite: at once, under the writer lock; PostgreSQL: just
        before COMMIT), IntegrityError otherwise and nothing committed."""


class KeyStore(Protocol):
    """The store side of the key bookkeeping: its dialect, reads, and transactions for each kind of write."""

    dialect: Dialect

    def read(self, statement: str, params: Params) -> list[tuple]:
        """One statement inside this thread's open transaction, else on its own."""

    def write(self, work: Callable[[Session], T], owner_tag: bytes | None = None) -> T:
        """``work`` in this thread's open write transaction, else in one of its own; with ``owner_tag`` (a change to
        an owner's versions) or without (an epoch's), under the locks such a change takes on this store."""

    def reserve(self, work: Callable[[Session], T], owner_tag: bytes | None = None) -> T:
        """``work`` in a new write transaction committed when it returns (StorageError inside another: a
        reservation must outlive a write that fails), under the same locks as ``write``."""

    def remove(self, work: Callable[[Session], T]) -> T:
        """``work``, a write that only destroys (a closing, a swept mark), in a write transaction that also runs on
        a full file system (the SQLite store releases its ballast for it)."""

    def locked(self) -> AbstractContextManager[object]:
        """A write transaction holding the lock key creation holds while it writes the keyring."""

    def count_versions_in_use(self, owner_tag: bytes) -> dict[int, int]:
        """How many rows each key version of an owner still wraps (inside a write transaction, after every put of
        the owner in flight has committed)."""

    def meta(self, name: str) -> bytes | None:
        """A vault-wide value."""
