"""The PostgreSQL store's connection pool as a service uses it: more threads than connections, a forked worker,
and a vault closed under load."""

from __future__ import annotations

import os
import threading

import pytest

from keys.testing import MemoryKeyring
from vault import Principal, StorageError, Vault

pytestmark = pytest.mark.postgres
ALICE = Principal("alice")


def test_more_threads_than_connections_all_complete(pg_schemas):
    ring = MemoryKeyring()
    with Vault.open(pg_schemas("v"), keyring_backend=ring, pool_size=2) as vault:
        vault.put(ALICE, "t", 0, "tool", "warm")
        errors: list[BaseException] = []

        def work(n: int) -> None:
            try:
                for step in range(5):
                    rep = vault.put(Principal(f"user{n}"), "t", step, "tool", f"{n}:{step}" * 100)
                    assert vault.read(Principal(f"user{n}"), rep.id).content == f"{n}:{step}" * 100
            except BaseException as error:  # reported below
                errors.append(error)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert errors == [] and vault.stats()["rows"] == 31


def test_a_forked_child_gets_its_own_connections_and_the_parent_keeps_working(pg_schemas):
    ring = MemoryKeyring()
    with Vault.open(pg_schemas("v"), keyring_backend=ring) as vault:
        before = vault.put(ALICE, "t", 0, "tool", "before the fork")
        backend = vault._store.query("SELECT pg_backend_pid()")  # the pool's one connection so far
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: its own pool; the parent's sockets are never used or closed here
            status = 1
            try:
                rep = vault.put(ALICE, "t", 1, "tool", "from the child")
                status = 0 if vault.read(ALICE, before.id).content == "before the fork" else 2
                os.write(write_end, rep.id.encode())
            finally:
                os._exit(status)
        os.close(write_end)
        _, status = os.waitpid(pid, 0)
        child_row = os.read(read_end, 64).decode()
        os.close(read_end)
        assert os.waitstatus_to_exitcode(status) == 0
        assert vault._store.query("SELECT pg_backend_pid()") == backend  # the same connection, never closed
        assert vault.read(ALICE, before.id).content == "before the fork"
        assert vault.read(ALICE, child_row).content == "from the child"


def test_after_close_every_call_is_a_storage_error(pg_schemas):
    vault = Vault.open(pg_schemas("v"), keyring_backend=MemoryKeyring())
    rep = vault.put(ALICE, "t", 0, "tool", "x")
    vault.close()
    with pytest.raises(StorageError):
        vault.read(ALICE, rep.id)
    with pytest.raises(StorageError):
        vault.put(ALICE, "t", 1, "tool", "y")


def test_libpq_environment_variables_fill_in_what_the_url_leaves_out(pg_schemas, monkeypatch):
    """``postgresql://`` alone: host, user, password, database and search_path all from PG* variables."""
    import psycopg

    location = pg_schemas("v")
    ring = MemoryKeyring()
    with Vault.open(location, keyring_backend=ring) as vault:
        rep = vault.put(ALICE, "t", 0, "tool", "found through the environment")
    parts = psycopg.conninfo.conninfo_to_dict(location)
    for name, variable in [("host", "PGHOST"), ("user", "PGUSER"), ("password", "PGPASSWORD"),
                           ("dbname", "PGDATABASE"), ("options", "PGOPTIONS")]:
        if parts.get(name):
            monkeypatch.setenv(variable, str(parts[name]))
    with Vault.open("postgresql://", keyring_backend=ring) as vault:
        assert vault.read(ALICE, rep.id).content == "found through the environment"


def test_a_read_with_no_key_cached_needs_no_second_connection(pg_schemas):
    """A read holds its snapshot's connection while it loads the owner's keys; those queries join it. Before, they
    took a second one: with pool_size=1 every such read waited 30 s for itself and failed, and with as many such
    reads at once as connections, all of them did."""
    location, ring = pg_schemas("v"), MemoryKeyring()
    with Vault.open(location, keyring_backend=ring, pool_size=1) as vault:
        rep = vault.put(ALICE, "t", 0, "tool", "hello")
    with Vault.open(location, keyring_backend=ring, pool_size=1) as vault:  # nothing of alice's cached
        assert vault.read(ALICE, rep.id).content == "hello"
        assert [row.id for row in vault.list_for_turn(ALICE, "t")] == [rep.id]
