"""What a server's error becomes at the PostgreSQL store's edge, for the errors a Citus coordinator adds: a worker
lost inside a statement is reported as an internal error (XX000, "failure on connection marked as essential"),
which is an outage (StorageError, retry), not the damaged data every other internal error means (IntegrityError).
The errors are real ones, raised by the test server with the sqlstate and message Citus uses."""

from __future__ import annotations

import psycopg
import pytest

from vault import IntegrityError, StorageError
from vault.storage.postgres.connections import translate

pytestmark = pytest.mark.postgres


def _raised(admin: psycopg.Connection, sqlstate: str, message: str) -> psycopg.Error:
    with pytest.raises(psycopg.Error) as caught:
        admin.execute(f"DO $$ BEGIN RAISE EXCEPTION '{message}' USING ERRCODE = '{sqlstate}'; END $$")
    return caught.value


def test_a_citus_worker_lost_inside_a_statement_is_a_storage_error(pg_admin: psycopg.Connection) -> None:
    error = translate(_raised(pg_admin, "XX000", "failure on connection marked as essential: 127.0.0.1:5433"))
    assert type(error) is StorageError and "127.0.0.1" not in str(error)


def test_any_other_internal_error_is_damaged_data(pg_admin: psycopg.Connection) -> None:
    assert isinstance(translate(_raised(pg_admin, "XX000", "could not read block 7 in file base/1/2")),
                      IntegrityError)
    assert isinstance(translate(_raised(pg_admin, "XX001", "invalid page in block 7")), IntegrityError)
