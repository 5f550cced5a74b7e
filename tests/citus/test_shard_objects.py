"""The allowlist on a Citus coordinator against the vault's own role: the shards on the workers carry their own
catalog, and the table owner reaches it from the coordinator (run_command_on_shards), no worker login needed."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from keys.testing import MemoryKeyring
from tests.support.citus import CitusCluster, connect, scratch_schema
from vault import IntegrityError, Principal, Vault

ALICE = Principal("alice")
# row security on every shard of chunks that hides its rows from deletes (no function needed: the owner's DDL)
UNDELETABLE_CHUNKS = ("ALTER TABLE %s ENABLE ROW LEVEL SECURITY", "ALTER TABLE %s FORCE ROW LEVEL SECURITY",
                      "CREATE POLICY everything ON %s USING (true)",
                      "CREATE POLICY undeletable ON %s AS RESTRICTIVE FOR DELETE USING (false)")


@pytest.fixture
def app_url(citus_cluster: CitusCluster, citus_admin: psycopg.Connection) -> Iterator[str]:
    """The coordinator's URL as a least-privilege login role owning a schema of its own (the vault's role)."""
    role, password = "citus_app_" + secrets.token_hex(4), secrets.token_urlsafe(18)
    citus_admin.execute(sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD {}").format(
        sql.Identifier(role), sql.Literal(password)))
    try:
        with scratch_schema(citus_admin, owner=role) as name:
            yield citus_cluster.url(user=role, password=password, schema=name)
    finally:
        citus_admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def _chunk_count(citus_cluster: CitusCluster, app_url: str) -> int:
    """Sealed chunks stored, counted by the superuser (row security does not hide them from it)."""
    with psycopg.connect(app_url) as app:
        schema_name = app.execute("SELECT current_schema()").fetchone()[0]
    with connect(citus_cluster.coordinator_url) as admin:
        counting = sql.SQL("SELECT count(*) FROM {}.chunks").format(sql.Identifier(schema_name))
        return admin.execute(counting).fetchone()[0]


def test_a_policy_the_vaults_role_plants_on_the_shards_is_refused(citus_cluster: CitusCluster, app_url: str) -> None:
    keyring = MemoryKeyring()
    with Vault.open(app_url, keyring_backend=keyring) as vault:
        doomed = vault.put(ALICE, "t", 1, "x", "l" * 200_000).id
        chunks = _chunk_count(citus_cluster, app_url)
        with psycopg.connect(app_url, autocommit=True) as app:  # the vault's role, on the coordinator only
            for command in UNDELETABLE_CHUNKS:
                assert app.execute("SELECT bool_and(success) FROM run_command_on_shards('chunks', %s)",
                                   [command]).fetchone() == (True,)
        with pytest.raises(IntegrityError):
            vault.delete(ALICE, doomed)
        assert _chunk_count(citus_cluster, app_url) == chunks > 1  # nothing reported deleted that remains
    with pytest.raises(IntegrityError, match="otherwise than scratchvault placed them"):
        Vault.open(app_url, keyring_backend=keyring)


def test_an_owners_table_made_a_reference_table_by_the_vaults_role_is_refused(app_url: str) -> None:
    keyring = MemoryKeyring()
    with Vault.open(app_url, keyring_backend=keyring) as vault:
        vault.put(ALICE, "t", 1, "x", "alice's")
    with psycopg.connect(app_url, autocommit=True) as app:  # Citus's own functions, open to the table's owner
        app.execute("SELECT undistribute_table('rows')")
        app.execute("SELECT create_reference_table('rows')")
    with pytest.raises(IntegrityError):
        Vault.open(app_url, keyring_backend=keyring)
