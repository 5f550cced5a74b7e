"""The vault on a Citus coordinator as it is: its connection settings are taken, its tables stay ordinary local
tables (advisory locks, the row sequence and ``FOR SHARE`` are the coordinator's own), every operation works, and
a table Citus distributed or replicated behind the vault's back is refused by its schema allowlist, which names
the trigger Citus adds (docs/decisions.md, "Sharding over Citus")."""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from typing import NamedTuple

import psycopg
import pytest
from psycopg import sql

from keys.testing import MemoryKeyring
from tests.support.citus import CitusCluster, connect, scratch_schema
from vault import IntegrityError, NotFound, Principal, Vault
from vault.storage.postgres import catalog, schema
from vault.storage.postgres.connections import IDLE_IN_TRANSACTION_MS, STATEMENT_TIMEOUT_MS, Pool

ALICE = Principal("alice", actor="planner", channel="web")


class AppLocation(NamedTuple):
    url: str
    schema: str


@pytest.fixture
def app_location(citus_cluster: CitusCluster, citus_admin: psycopg.Connection) -> Iterator[AppLocation]:
    """A URL to the coordinator as a least-privilege login role (Citus makes it on the workers too), its search_path
    a schema of its own that it owns; schema and role dropped afterwards."""
    role, password = "citus_app_" + secrets.token_hex(4), secrets.token_urlsafe(18)
    citus_admin.execute(sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD {}").format(
        sql.Identifier(role), sql.Literal(password)))
    try:
        with scratch_schema(citus_admin, owner=role) as name:
            yield AppLocation(citus_cluster.url(user=role, password=password, schema=name), name)
    finally:
        citus_admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_the_coordinator_takes_the_vault_connection_settings(app_location: AppLocation) -> None:
    pool = Pool(app_location.url, 1)
    try:
        connection = pool.get()
        settings = connection.execute("SELECT current_setting('statement_timeout'), "
                                      "current_setting('idle_in_transaction_session_timeout'), "
                                      "current_setting('TimeZone')").fetchone()
        pool.put(connection)
    finally:
        pool.close()
    assert settings == (f"{STATEMENT_TIMEOUT_MS // 60_000}min", f"{IDLE_IN_TRANSACTION_MS // 60_000}min", "UTC")


def test_every_operation_works_on_the_coordinators_local_tables(citus_cluster: CitusCluster,
                                                                app_location: AppLocation) -> None:
    with Vault.open(app_location.url, keyring_backend=MemoryKeyring()) as vault:
        small = vault.put(ALICE, "t1", 1, "tool", "s" * 4096)
        large = vault.put(ALICE, "t1", 2, "tool", "l" * 200_000)
        assert vault.read(ALICE, small.id, mode="range", start=10, end=14).content == "ssss"
        assert vault.read(ALICE, large.id, mode="range", start=150_000, end=150_004).content == "llll"
        assert [rep.id for rep in vault.list_for_turn(ALICE, "t1")] == [small.id, large.id]
        vault.extend(ALICE, small.id, 7200)
        vault.delete(ALICE, small.id)
        with pytest.raises(NotFound):
            vault.read(ALICE, small.id)
        assert vault.rotate_owner_key("alice") == 2
        assert vault.rewrap("alice") == 1
        assert vault.retire_old_key_versions("alice") == 1
        assert vault.shred_owner("alice") == 1
        assert vault.gc() == 0
    with connect(citus_cluster.url(schema=app_location.schema)) as admin:
        distributed = admin.execute("SELECT count(*) FROM pg_dist_partition WHERE logicalrelid IN (SELECT oid FROM "
                                    "pg_class WHERE relnamespace = %s::regnamespace)", [app_location.schema]).fetchone()
        assert distributed == (0,), "the vault's tables are the coordinator's own"
        assert catalog.unexpected(admin, app_location.schema, schema.TABLES) == []


def test_a_table_citus_took_over_is_refused_by_the_allowlist(citus_cluster: CitusCluster,
                                                             citus_admin: psycopg.Connection,
                                                             citus_schema: str) -> None:
    url = citus_cluster.url(schema=citus_schema)
    Vault.open(url, keyring_backend=MemoryKeyring()).close()
    with connect(url) as vault_schema:
        vault_schema.execute("SELECT create_distributed_table('owners', 'owner_tag')")
        vault_schema.execute("SELECT create_reference_table('meta')")
        found = catalog.unexpected(vault_schema, citus_schema, schema.TABLES)
    assert [(table, kind) for table, kind, _ in found] == [("meta", "trigger"), ("owners", "trigger")]
    assert all(re.fullmatch(r"truncate_trigger_\d+", name) for _, _, name in found), found
    with pytest.raises(IntegrityError, match="trigger on meta, trigger on owners"):
        Vault.open(url, keyring_backend=MemoryKeyring())
