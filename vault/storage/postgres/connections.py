"""Connections to a PostgreSQL server: a pool sized by the caller, made again in a forked child, connections
checked and replaced after a server restart, and psycopg's errors as VaultErrors with no part of the URL in them.

Every connection runs in autocommit mode and the store sends BEGIN and COMMIT itself, so it chooses each
transaction's isolation (write: READ COMMITTED with row and advisory locks; read: REPEATABLE READ READ ONLY).
Results come back in binary format: in text format bytea travels as hex, twice the bytes to send and to parse.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Literal, TypeVar

from vault.errors import IntegrityError, InvalidArgument, QuotaExceeded, StorageError

try:
    import psycopg
    import psycopg_pool
    from psycopg import errors as pg_errors
except ImportError:  # the optional extra is not installed: said when a PostgreSQL location is opened
    psycopg = None  # type: ignore[assignment]

T = TypeVar("T")
log = logging.getLogger("scratchvault")
CONNECT_TIMEOUT = 10  # seconds to reach the server (libpq's connect_timeout), unless the URL says otherwise
STATEMENT_TIMEOUT_MS = 60_000  # a statement (a lock wait included) that takes longer is cancelled: StorageError
IDLE_IN_TRANSACTION_MS = 300_000  # a client that hangs inside a transaction loses it (and its locks)
# sqlstates a write retries (a new transaction, from the start): a deadlock, a serialization failure
RETRY_STATES = frozenset({"40P01", "40001"})
# sqlstates only tables altered behind the vault's back produce: a column of another type than the vault made (no
# operator or cast for it, a cached plan whose result type changed), a rule on rows (refused in a delete's WITH), a
# key the vault never reuses taken twice (the row sequence set back onto live rows), the row sequence run to its
# end (set forward): tampering, not an outage
ALTERED_STATES = frozenset({"42883", "42804", "42846", "0A000", "23505", "2200H"})
# what a Citus coordinator says, as an internal error (XX000) rather than a connection failure, when a worker it
# had a connection to went away inside a statement: an outage, not damaged data
CITUS_LOST_WORKER = "failure on connection marked as essential"
_abandoned: list[object] = []  # pools inherited across fork: never closed in the child (that would end the parent's)


def require_driver() -> None:
    """InvalidArgument with the remedy when the PostgreSQL extra is not installed."""
    if psycopg is None:
        raise InvalidArgument("a PostgreSQL location needs the optional dependencies: install "
                              "scratchvault with its postgres extra (pip install '<clone or wheel>[postgres]')")


class Pool:
    """A psycopg connection pool for one server, made on first use in each process (a pool is not fork-safe: a
    child makes its own, and leaves the parent's connections alone)."""

    def __init__(self, url: str, size: int) -> None:
        require_driver()
        self._url, self._size = url, size
        self._lock = threading.Lock()
        self._pool: psycopg_pool.ConnectionPool | None = None
        self._pid = 0
        self.closed = False

    def _current(self) -> psycopg_pool.ConnectionPool:
        with self._lock:
            if self.closed:
                raise StorageError("the vault is closed")
            if self._pool is None or self._pid != os.getpid():
                if self._pool is not None:
                    _abandoned.append(self._pool)  # the parent's: its sockets are the parent's to close
                self._pool = self._open()
                self._pid = os.getpid()
            return self._pool

    def _open(self) -> psycopg_pool.ConnectionPool:
        """A new pool, after one connection made directly: a server that refuses or cannot be reached is a
        StorageError at once, where a pool would retry in the background until its timeout."""
        kwargs: dict[str, Any] = {"autocommit": True, "connect_timeout": CONNECT_TIMEOUT}
        with TRANSLATE:
            if "connect_timeout" in psycopg.conninfo.conninfo_to_dict(self._url) or os.environ.get("PGCONNECT_TIMEOUT"):
                del kwargs["connect_timeout"]
            psycopg.connect(self._url, **kwargs).close()
            return psycopg_pool.ConnectionPool(self._url, min_size=0, max_size=self._size, kwargs=kwargs,
                                               configure=_configure, open=True, timeout=CONNECT_TIMEOUT + 20,
                                               name="scratchvault")

    def get(self) -> psycopg.Connection:
        """A connection out of the pool (give it back with ``put``)."""
        pool = self._current()
        with TRANSLATE:
            return pool.getconn()

    def put(self, connection: psycopg.Connection) -> None:
        """Give a connection back; a broken one, or one left inside a transaction, is discarded by the pool."""
        pool = self._pool
        if pool is None or self._pid != os.getpid() or self.closed:
            with contextlib.suppress(Exception):
                connection.close()
            return
        with contextlib.suppress(Exception):
            pool.putconn(connection)

    def check(self) -> None:
        """Drop every idle connection the server no longer answers on (after a restart)."""
        with contextlib.suppress(Exception):
            self._current().check()

    def close(self) -> None:
        """Close the pool's connections; later calls raise StorageError."""
        with self._lock:
            self.closed = True
            pool, self._pool = self._pool, None
        if pool is not None and self._pid == os.getpid():
            with contextlib.suppress(Exception):
                pool.close(timeout=5)


def _configure(connection: psycopg.Connection) -> None:
    """Each new connection's settings: bounded statements and idle transactions, UTC, no server-side prepared
    statements kept past a restart's reconnect (psycopg prepares hot statements itself)."""
    connection.execute(f"SET statement_timeout = {STATEMENT_TIMEOUT_MS}; "
                       f"SET idle_in_transaction_session_timeout = {IDLE_IN_TRANSACTION_MS}; SET TimeZone = 'UTC'")


class _Translate:
    """``with TRANSLATE:`` turns a psycopg or pool error into the VaultError it means. The server's message is
    kept only for errors it writes about the schema (never a value: bytea parameters are not echoed, and the
    URL, which may hold a password, is never part of a message here)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: object) -> Literal[False]:
        if error is None or psycopg is None:
            return False
        if isinstance(error, psycopg_pool.PoolTimeout):
            raise StorageError("no PostgreSQL connection became free in time (the pool is exhausted or the server "
                               "unreachable); raise pool_size or check the server") from None
        if not isinstance(error, psycopg.Error):
            return False
        raise translate(error) from None


def translate(error: BaseException) -> StorageError | IntegrityError:
    """The VaultError a psycopg error means (its text is not passed on: it can quote the connection string)."""
    state = getattr(error, "sqlstate", None) or ""
    if state == "53100":
        return QuotaExceeded("the PostgreSQL server's disk is full; nothing was stored (free space on the server)")
    if state in RETRY_STATES:
        return Conflict("a concurrent transaction on the PostgreSQL server conflicted with this one; retry")
    if state == "57014":
        return StorageError("a PostgreSQL statement took longer than the statement timeout and was cancelled")
    if state == "XX000" and _primary_message(error).startswith(CITUS_LOST_WORKER):
        return StorageError("a Citus worker could not be reached or closed the connection; retry once it is back")
    if state.startswith("XX") or state == "22P02":
        return IntegrityError("the PostgreSQL server reports damaged data")
    if state in ALTERED_STATES:
        return IntegrityError(f"the vault's tables were altered behind its back (sqlstate {state}: a column's type "
                              "changed, a rule added, a seq taken twice or the row sequence moved); restore them "
                              "from backup")
    if state.startswith(("08", "57P")) or isinstance(error, psycopg.OperationalError):
        return StorageError("the PostgreSQL server could not be reached or closed the connection "
                            f"(sqlstate {state or 'none'}); retry once it is back")
    if state.startswith("42"):
        return StorageError(f"the PostgreSQL schema is not what scratchvault expects (sqlstate {state}): a table or "
                            "privilege is missing; see doctor")
    return StorageError(f"a PostgreSQL error (sqlstate {state or 'none'}, {type(error).__name__})")


def _primary_message(error: BaseException) -> str:
    """The server's message of a psycopg error (read here, never passed on), or ""."""
    diag = getattr(error, "diag", None)
    return str(getattr(diag, "message_primary", None) or "")


class Conflict(StorageError):
    """A deadlock or serialization failure: the transaction was rolled back and may be run again."""


TRANSLATE = _Translate()


@contextmanager
def translated() -> Iterator[None]:
    """``TRANSLATE`` as a generator-friendly context manager."""
    with TRANSLATE:
        yield


def fetched(fetch: Callable[[], T]) -> T:
    """``fetch()`` (rows of a result, which psycopg converts from the server's binary values as they are fetched),
    its failures as VaultErrors: a value the driver cannot convert (a column whose type a writer of the database
    changed: a date past year 9999, JSON nested deeper than Python parses) is an IntegrityError, never the
    driver's DataError or Python's RecursionError."""
    try:
        return fetch()
    except psycopg.Error as error:
        if isinstance(error, psycopg.DataError) and not getattr(error, "sqlstate", None):
            raise IntegrityError(UNLOADABLE) from None  # raised by a loader, not by the server
        raise translate(error) from None
    except (ValueError, TypeError, ArithmeticError, RecursionError, MemoryError):  # a loader's own error
        raise IntegrityError(UNLOADABLE) from None


def present(row: tuple[Any, ...] | None) -> tuple[Any, ...]:
    """The row of a statement that always returns one (an aggregate, a function call); none is a StorageError."""
    if row is None:
        raise StorageError("the PostgreSQL server returned no row where a statement always returns one")
    return row


UNLOADABLE = "a value the PostgreSQL server returned is not of its column's type (the table was altered)"


def is_retryable(error: BaseException) -> bool:
    """Whether a failed write may be run again as a new transaction (a deadlock or serialization failure)."""
    return isinstance(error, Conflict) or (psycopg is not None and isinstance(error, pg_errors.Error)
                                           and getattr(error, "sqlstate", None) in RETRY_STATES)
