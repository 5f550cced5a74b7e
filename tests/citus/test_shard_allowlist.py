"""The allowlist reaches the shards: an object planted on a placement of the vault's tables, on a worker or on the
coordinator's own copy of a reference table, or on a worker's shell, makes the next open refuse the database with
IntegrityError naming the table and kind, never what was planted; a distribution changed behind the vault's back
or a placement not active is refused as well; a vault left alone opens (vault/storage/postgres/shards.py)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from tests.citus.placements import (
    DistributedVault,
    as_attacker,
    distributed_vault,
    shard_on_a_worker,
    shard_on_the_coordinator,
)
from tests.support.citus import CitusCluster, connect
from vault import IntegrityError, Vault
from vault.storage.postgres import citus, shards

KEEP = "CREATE FUNCTION {schema}.planted_keep() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NULL; END'"
# (table, what is planted on one of its shards, the kind the refusal names)
PLANTED = {
    "trigger": ("rows", [KEEP, "CREATE TRIGGER planted BEFORE DELETE ON {shard} FOR EACH ROW EXECUTE FUNCTION "
                               "{schema}.planted_keep()"], "trigger added on rows (1 shard)"),
    "rule": ("chunks", ["CREATE RULE planted AS ON DELETE TO {shard} DO INSTEAD NOTHING"],
             "rule added on chunks (1 shard)"),
    "policy": ("owner_keys", ["ALTER TABLE {shard} ENABLE ROW LEVEL SECURITY",
                              "CREATE POLICY planted ON {shard} FOR DELETE USING (false)"],
               "policy added on owner_keys (1 shard)"),
    "index": ("key_tombstones", ["CREATE UNIQUE INDEX planted ON {shard} (owner_tag)"],
              "index added on key_tombstones (1 shard)"),
    "foreign key from the shard": ("deletions", [
        "CREATE TABLE {schema}.planted (owner_tag bytea PRIMARY KEY)",
        "ALTER TABLE {shard} ADD CONSTRAINT planted FOREIGN KEY (owner_tag) REFERENCES {schema}.planted "
        "ON DELETE CASCADE NOT VALID"], "constraint added on deletions (1 shard)"),
    "foreign key to the shard": ("owners", [
        "CREATE TABLE {schema}.planted (owner_tag bytea REFERENCES {shard} ON DELETE SET NULL)"],
        "referenced by added on owners (1 shard)"),
    "column": ("summaries", ["ALTER TABLE {shard} ADD COLUMN planted bytea"], "column added on summaries (1 shard)"),
    "inheritance": ("rows", ["CREATE TABLE {schema}.planted () INHERITS ({shard})"],
                    "inheritance added on rows (1 shard)"),
    "trigger on a reference table's shard": ("meta", [KEEP, "CREATE TRIGGER planted BEFORE DELETE ON {shard} "
                                                            "FOR EACH ROW EXECUTE FUNCTION {schema}.planted_keep()"],
                                             "trigger added on meta (1 shard)"),
}


@pytest.fixture
def vault_on_citus(citus_cluster: CitusCluster, citus_admin: psycopg.Connection) -> Iterator[DistributedVault]:
    with distributed_vault(citus_cluster, citus_admin) as made:
        yield made


def _refused(made: DistributedVault) -> str:
    with pytest.raises(IntegrityError) as refused:
        Vault.open(made.url, keyring_backend=made.keyring)
    return str(refused.value)


def _plant(node_url: str, statements: list[str], schema: str, shard: str) -> None:
    with as_attacker(node_url) as node:
        for statement in statements:
            node.execute(sql.SQL(statement).format(schema=sql.Identifier(schema),
                                                   shard=sql.Identifier(schema, shard)))


def test_a_vault_left_alone_opens_again_and_its_placements_check(vault_on_citus: DistributedVault) -> None:
    Vault.open(vault_on_citus.url, keyring_backend=vault_on_citus.keyring).close()
    with connect(vault_on_citus.url) as owner:
        assert shards.problems(owner, vault_on_citus.schema) == []
        placed = owner.execute("SELECT count(*) FROM pg_dist_shard s JOIN pg_dist_placement USING (shardid) "
                               "JOIN pg_class c ON c.oid = s.logicalrelid WHERE c.relnamespace = %s::regnamespace",
                               [vault_on_citus.schema]).fetchone()
    assert placed is not None and placed[0] >= len(citus.OWNER_TABLES) * 2 + len(citus.SHARED_TABLES) * 2, \
        "the check ran over the distributed tables' shards on both workers"


@pytest.mark.parametrize("planted", PLANTED, ids=list(PLANTED))
def test_an_object_planted_on_a_shard_on_a_worker_is_refused(citus_cluster: CitusCluster,
                                                             citus_admin: psycopg.Connection,
                                                             vault_on_citus: DistributedVault, planted: str) -> None:
    table, statements, named = PLANTED[planted]
    shard, worker = shard_on_a_worker(citus_admin, citus_cluster, vault_on_citus.schema, table)
    _plant(worker, statements, vault_on_citus.schema, shard)
    message = _refused(vault_on_citus)
    assert named in message and "planted" not in message


def test_a_rule_on_the_coordinators_copy_of_a_reference_table_is_refused(
        citus_cluster: CitusCluster, citus_admin: psycopg.Connection, vault_on_citus: DistributedVault) -> None:
    shard = shard_on_the_coordinator(citus_admin, vault_on_citus.schema, "meta")
    _plant(citus_cluster.coordinator_url, ["CREATE RULE planted AS ON DELETE TO {shard} DO INSTEAD NOTHING"],
           vault_on_citus.schema, shard)
    message = _refused(vault_on_citus)
    assert "rule added on meta (1 shard)" in message and "planted" not in message


def test_a_trigger_on_a_workers_shell_is_refused(citus_cluster: CitusCluster,
                                                 vault_on_citus: DistributedVault) -> None:
    _plant(citus_cluster.worker_urls[0], [KEEP, "CREATE TRIGGER planted BEFORE DELETE ON {shard} FOR EACH ROW "
                                                "EXECUTE FUNCTION {schema}.planted_keep()"],
           vault_on_citus.schema, "owners")
    assert "trigger added on owners (1 worker shell)" in _refused(vault_on_citus)


def test_a_shard_dropped_on_a_worker_is_refused(citus_cluster: CitusCluster, citus_admin: psycopg.Connection,
                                                vault_on_citus: DistributedVault) -> None:
    shard, worker = shard_on_a_worker(citus_admin, citus_cluster, vault_on_citus.schema, "key_reservations")
    _plant(worker, ["DROP TABLE {shard}"], vault_on_citus.schema, shard)
    assert "table missing on key_reservations (1 shard)" in _refused(vault_on_citus)


def test_an_owner_table_moved_out_of_the_colocation_group_is_refused(citus_admin: psycopg.Connection,
                                                                     vault_on_citus: DistributedVault) -> None:
    with connect(vault_on_citus.url) as owner:
        owner.execute("SELECT update_distributed_table_colocation('key_tombstones', colocate_with => 'none')")
    assert "no colocation with owners on key_tombstones" in _refused(vault_on_citus)


def test_a_placement_not_active_is_refused(citus_admin: psycopg.Connection, vault_on_citus: DistributedVault) -> None:
    placement = citus_admin.execute("SELECT min(placementid) FROM pg_dist_placement JOIN pg_dist_shard USING (shardid) "
                                    "WHERE logicalrelid = %s::regclass", [f"{vault_on_citus.schema}.rows"]).fetchone()
    assert placement is not None
    citus_admin.execute("UPDATE pg_dist_placement SET shardstate = 4 WHERE placementid = %s", placement)
    try:
        assert "not active on rows (1 placement)" in _refused(vault_on_citus)
    finally:
        citus_admin.execute("UPDATE pg_dist_placement SET shardstate = 1 WHERE placementid = %s", placement)


def test_a_role_that_only_uses_the_tables_checks_the_shards_too(citus_cluster: CitusCluster,
                                                                citus_admin: psycopg.Connection,
                                                                vault_on_citus: DistributedVault) -> None:
    role, password = "citus_user_" + secrets.token_hex(4), secrets.token_urlsafe(18)
    names = {"role": sql.Identifier(role), "schema": sql.Identifier(vault_on_citus.schema)}
    for statement in ("CREATE ROLE {role} LOGIN PASSWORD " + sql.Literal(password).as_string(citus_admin),
                      "GRANT USAGE ON SCHEMA {schema} TO {role}",
                      "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}",
                      "GRANT USAGE ON ALL SEQUENCES IN SCHEMA {schema} TO {role}"):
        citus_admin.execute(sql.SQL(statement).format(**names))
    try:
        user = DistributedVault(citus_cluster.url(user=role, password=password, schema=vault_on_citus.schema),
                                vault_on_citus.schema, vault_on_citus.keyring)
        Vault.open(user.url, keyring_backend=user.keyring).close()
        table, statements, named = PLANTED["rule"]
        shard, worker = shard_on_a_worker(citus_admin, citus_cluster, vault_on_citus.schema, table)
        _plant(worker, statements, vault_on_citus.schema, shard)
        assert named in _refused(user)
    finally:
        citus_admin.execute(sql.SQL("DROP OWNED BY {role}; DROP ROLE {role}").format(**names))
