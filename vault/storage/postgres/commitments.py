"""The PostgreSQL store's side of the key bookkeeping written once in vault/storage/sql/ (``keys.KeyCommitments`` and
``keys.commitments.EpochRecords``; threat_model.md, "Keyring entries"). ``locked`` is the key lock, held by key
creation and rotation while they write the keyring (rare); every change to an owner's versions (a reservation, a
commitment, a tombstone, a retirement's count) takes the key lock and then the owner's lock, in that order, and
every change to an epoch's attempts the key lock: so a shred or retirement waits for a rotation in flight, no
reservation is abandoned while its key is being written on another host, and none of them deadlocks. A write that
must stick has the catalog of its tables checked before COMMIT (writes.PgWriteTx)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, NoReturn, Protocol, TypeVar

from vault.errors import IntegrityError, StorageError
from vault.storage.postgres.rows import PgReads
from vault.storage.postgres.writes import PgWriteTx
from vault.storage.sql import KeyRecords
from vault.storage.sql.dialect import POSTGRES
from vault.storage.sql.session import Params, Session
from vault.storage.sql.values import key_version

T = TypeVar("T")


class PostgresSchema(Protocol):
    """What the key bookkeeping uses of the PostgreSQL store (PostgresStore): statements inside this thread's open
    transaction or snapshot, and write transactions."""

    def query(self, statement: str, parameters: Any = ()) -> list[tuple]: ...

    def open_transaction(self) -> PgReads | None: ...

    def transaction(self) -> PgWriteTx: ...

    def get_meta(self, name: str) -> bytes | None: ...


class _Session:
    """Statements in one write transaction."""

    __slots__ = ("_tx",)

    def __init__(self, tx: PgWriteTx) -> None:
        self._tx = tx

    def run(self, statement: str, params: Params) -> None:
        self._tx._run(statement, params)

    def one(self, statement: str, params: Params) -> tuple | None:
        return self._tx._one(statement, params)

    def all(self, statement: str, params: Params) -> list[tuple]:
        return self._tx._all(statement, params)

    def refuse(self, message: str) -> NoReturn:
        self._tx.distrust()
        raise IntegrityError(message)

    def check_tables_before_commit(self, tables: frozenset[str]) -> None:
        """Checked before COMMIT: by then the transaction's locks keep its tables as they are until it ends."""
        self._tx.tables_checked_at_commit |= tables


class PostgresKeyStore:
    """vault.storage.sql.session.KeyStore on one PostgreSQL schema."""

    __slots__ = ("_store",)
    dialect = POSTGRES

    def __init__(self, store: PostgresSchema) -> None:
        self._store = store

    def read(self, statement: str, params: Params) -> list[tuple]:
        return self._store.query(statement, params)

    @contextmanager
    def _writing(self, owner_tag: bytes | None) -> Iterator[PgWriteTx]:
        """The thread's open write transaction, else a new one; the key lock taken in it, then the owner's."""
        joined = self._store.open_transaction()
        with nullcontext(joined) if isinstance(joined, PgWriteTx) else self._store.transaction() as tx:
            tx.lock_keys(owner_tag)
            yield tx

    def write(self, work: Callable[[Session], T], owner_tag: bytes | None = None) -> T:
        with self._writing(owner_tag) as tx:
            return work(_Session(tx))

    def reserve(self, work: Callable[[Session], T], owner_tag: bytes | None = None) -> T:
        if self._store.open_transaction() is not None:
            raise StorageError("a key version or epoch attempt cannot be reserved inside another write transaction")
        return self.write(work, owner_tag)

    def remove(self, work: Callable[[Session], T]) -> T:
        return self.write(work)

    def locked(self) -> AbstractContextManager[object]:
        return self._writing(None)

    def count_versions_in_use(self, owner_tag: bytes) -> dict[int, int]:
        """Inside a write transaction, under the owner's lock: a retirement counts after every put of the owner in
        flight has committed."""
        joined = self._store.open_transaction()
        if isinstance(joined, PgWriteTx):
            joined.lock_keys(owner_tag)
        found = self._store.query("SELECT key_version, count(*) FROM rows WHERE owner_tag = %s GROUP BY key_version",
                                  (owner_tag,))
        return {key_version(version): count for version, count in found}

    def meta(self, name: str) -> bytes | None:
        return self._store.get_meta(name)


class PostgresCommitments(KeyRecords):
    """The key bookkeeping of one PostgreSQL schema."""

    __slots__ = ()

    def __init__(self, store: PostgresSchema) -> None:
        super().__init__(PostgresKeyStore(store))
