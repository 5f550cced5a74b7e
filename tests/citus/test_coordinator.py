"""The vault on a Citus coordinator: its connection settings are taken; opening it makes an owner's tables
distributed by owner_tag, co-located, and the shared ones reference tables (vault/storage/postgres/citus.py); every
operation works on them; a vault made with local tables, rows and all, is distributed when it opens, nothing left in
the coordinator's own heap; and the allowlist takes Citus's own trigger but not one made to look like it."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import NamedTuple

import psycopg
import pytest
from psycopg import sql

from keys.testing import MemoryKeyring
from tests.support.citus import CitusCluster, connect, scratch_schema
from vault import IntegrityError, NotFound, Principal, Vault
from vault.storage.postgres import catalog, citus, schema
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


def _placement(admin: psycopg.Connection, schema_name: str) -> dict[str, tuple[str, str | None, int]]:
    """Each vault table Citus knows in ``schema_name``: (method, distribution column, colocation group)."""
    found = admin.execute(
        "SELECT c.relname::text, p.partmethod::text, column_to_column_name(p.logicalrelid, p.partkey), p.colocationid "
        "FROM pg_dist_partition p JOIN pg_class c ON c.oid = p.logicalrelid WHERE c.relnamespace = %s::regnamespace",
        [schema_name]).fetchall()
    return {table: (method, column, group) for table, method, column, group in found}


def _local_bytes(admin: psycopg.Connection, schema_name: str) -> dict[str, int]:
    """The size of each vault table's own heap on the coordinator (its rows live in the shards)."""
    return {table: admin.execute("SELECT pg_relation_size(%s)", [f"{schema_name}.{table}"]).fetchone()[0]
            for table in schema.TABLES}


def _every_operation(vault: Vault) -> None:
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


def test_an_owners_tables_are_distributed_by_owner_and_every_operation_works(citus_cluster: CitusCluster,
                                                                               app_location: AppLocation) -> None:
    with Vault.open(app_location.url, keyring_backend=MemoryKeyring()) as vault:
        _every_operation(vault)
    with connect(citus_cluster.url(schema=app_location.schema)) as admin:
        placed = _placement(admin, app_location.schema)
        assert catalog.unexpected(admin, app_location.schema, schema.TABLES) == []
    assert set(placed) == set(schema.TABLES)
    groups = {placed[table][2] for table in citus.OWNER_TABLES}
    assert all(placed[table][:2] == ("h", "owner_tag") for table in citus.OWNER_TABLES) and len(groups) == 1
    assert all(placed[table][0] == "n" for table in citus.SHARED_TABLES)


def test_a_vault_with_local_tables_is_distributed_when_it_opens_and_its_rows_leave_the_coordinator(
        citus_cluster: CitusCluster, app_location: AppLocation, monkeypatch: pytest.MonkeyPatch) -> None:
    keyring = MemoryKeyring()
    with monkeypatch.context() as before_citus:  # a vault made where the extension was not yet installed
        before_citus.setattr(citus, "has_citus", lambda connection: False)
        with Vault.open(app_location.url, keyring_backend=keyring) as vault:
            kept = [vault.put(ALICE, "t1", step, "tool", f"row {step} " * 3000).id for step in range(1, 4)]
    with connect(citus_cluster.url(schema=app_location.schema)) as admin:
        assert _placement(admin, app_location.schema) == {}
        assert _local_bytes(admin, app_location.schema)["rows"] > 0
    with Vault.open(app_location.url, keyring_backend=keyring) as vault:
        assert [vault.get(ALICE, row_id).content for row_id in kept] == [
            f"row {step} " * 3000 for step in range(1, 4)]
    with connect(citus_cluster.url(schema=app_location.schema)) as admin:
        assert set(_placement(admin, app_location.schema)) == set(schema.TABLES)
        assert set(_local_bytes(admin, app_location.schema).values()) == {0}


def test_the_allowlist_takes_citus_trigger_and_refuses_one_made_to_look_like_it(citus_cluster: CitusCluster,
                                                                              citus_schema: str) -> None:
    url = citus_cluster.url(schema=citus_schema)
    Vault.open(url, keyring_backend=MemoryKeyring()).close()
    with connect(url) as admin:
        real = admin.execute("SELECT tgname FROM pg_trigger WHERE tgrelid = 'owners'::regclass").fetchall()
        assert len(real) == 1 and catalog.unexpected(admin, citus_schema, schema.TABLES) == []
        admin.execute("SET citus.enable_unsafe_triggers = on")  # a superuser's to set, like the trigger itself
        admin.execute("CREATE FUNCTION keep_rows() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NULL; END'")
        admin.execute("CREATE TRIGGER truncate_trigger_1 AFTER TRUNCATE ON meta FOR EACH STATEMENT "
                      "EXECUTE FUNCTION keep_rows()")
        assert [(table, kind) for table, kind, _ in catalog.unexpected(admin, citus_schema, schema.TABLES)] == [
            ("meta", "trigger")]
    with pytest.raises(IntegrityError, match="trigger on meta"):
        Vault.open(url, keyring_backend=MemoryKeyring())
