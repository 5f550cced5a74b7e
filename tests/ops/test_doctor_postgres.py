"""``scratchvault doctor --db postgresql://...`` on the test server: the role's privileges (a least-privilege role
passes; the superuser, a role with CREATEDB or CREATEROLE, one missing what the vault needs fail; one owning the
tables is warned about), durability settings, the vault's facts, and that it changes nothing. The URL's password
is never shown. TCP and TLS are tests/ops/test_doctor_postgres_tls.py (a cluster of their own)."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator

import psycopg
import pytest
from psycopg import sql

from keys.testing import MemoryKeyring
from tests.ops.test_cli import Cli
from tests.support.postgres import TEST_DATABASE, with_role
from vault import Principal, Vault
from vault.storage.postgres.schema import SCHEMA_VERSION as POSTGRES_SCHEMA

ALICE = Principal("alice")
GRANTS = "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}"


def schema_of(url: str) -> str:
    with psycopg.connect(url, autocommit=True) as connection:
        return connection.execute("SELECT current_schema()").fetchone()[0]


@pytest.fixture
def make_role(pg_test_database) -> Iterator[Callable[..., tuple[str, str]]]:
    """``make_role(schema, attributes, grants)``: a new login role allowed into the test database and ``schema``,
    with ``grants`` (statements formatted with {schema} and {role}); returns (its name, its URL with a password
    into that schema). Dropped after the test with everything granted to it."""
    made: list[str] = []

    def make(schema: str, attributes: str = "", grants: tuple[str, ...] = ()) -> tuple[str, str]:
        role, password = f"sv_doctor_{secrets.token_hex(4)}", f"CANARY-PW-{secrets.token_hex(6)}"
        names = {"schema": sql.Identifier(schema), "role": sql.Identifier(role)}
        pg_test_database.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {} " + attributes).format(
            sql.Identifier(role), sql.Literal(password)))
        made.append(role)
        for statement in ("GRANT CONNECT ON DATABASE " + TEST_DATABASE + " TO {role}",
                          "GRANT USAGE ON SCHEMA {schema} TO {role}", *grants):
            pg_test_database.execute(sql.SQL(statement).format(**names))
        return role, with_role(pg_test_database.admin_url, user=role, password=password, dbname=TEST_DATABASE,
                               schema=schema)

    yield make
    for role in made:
        pg_test_database.execute(sql.SQL("DROP OWNED BY {role}; DROP ROLE {role}").format(role=sql.Identifier(role)))


@pytest.fixture
def filled(pg_location) -> tuple[str, MemoryKeyring, str]:
    """A vault with one row in ``pg_location``'s schema (its tables owned by the test's app role)."""
    ring = MemoryKeyring()
    with Vault.open(pg_location, keyring_backend=ring) as vault:
        row = vault.put(ALICE, "t", 1, "x", "hello").id
    return pg_location, ring, row


def doctor(tmp_path, url: str) -> tuple[int, str]:
    """doctor as a subprocess (a file keyring as the operator's backend); its exit code and stdout, after checking
    that neither stream shows the URL's password."""
    result = Cli(tmp_path, url).run("doctor")
    out, err = result.stdout.decode(), result.stderr.decode()
    password = psycopg.conninfo.conninfo_to_dict(url).get("password")
    assert not password or password not in out + err
    return result.returncode, out


def test_a_least_privilege_role_passes_and_is_all_the_vault_needs(tmp_path, filled, make_role):
    location, ring, row = filled
    role, url = make_role(schema_of(location), "", (GRANTS, "GRANT USAGE ON SEQUENCE {schema}.row_seq TO {role}"))
    code, out = doctor(tmp_path, url)
    assert code == 0, out
    assert "ok    connection: local Unix socket in /" in out
    assert f"ok    role {role}: not a superuser; no CREATEROLE, CREATEDB, BYPASSRLS, REPLICATION" in out
    assert f"      role {role} holds on the vault's tables: SELECT, INSERT, UPDATE, DELETE, USAGE on row_seq\n" in out
    assert "ok    fsync on" in out and "ok    synchronous_commit on" in out
    assert "ok    archive_mode off, no replicas or replication slots" in out
    assert f"schema version {POSTGRES_SCHEMA}, vault id" in out and "rows by key version {1: 1}" in out
    assert "database size " in out and "several hosts: every host must reach this same secret service" in out
    assert "WARN" not in out and "FAIL" not in out
    with Vault.open(url, keyring_backend=ring) as vault:  # and the vault works with no more than that
        assert vault.get(ALICE, row).content == "hello"
        vault.delete(ALICE, row)
        again = vault.put(ALICE, "t", 2, "x", "again").id
        assert vault.maintain_keys().failed == () and vault.get(ALICE, again).key_version == 2


def test_the_superuser_fails(tmp_path, filled, pg_test_database):
    code, out = doctor(tmp_path, pg_test_database.url(superuser=True, schema=schema_of(filled[0])))
    assert code == 1
    assert "FAIL  role postgres: holds SUPERUSER, CREATEROLE, CREATEDB, BYPASSRLS, REPLICATION;" in out


def test_a_role_that_may_create_databases_or_roles_fails_and_is_told_what_it_holds(tmp_path, filled, make_role):
    role, url = make_role(schema_of(filled[0]), "CREATEDB CREATEROLE", (GRANTS,))
    code, out = doctor(tmp_path, url)
    assert code == 1 and f"FAIL  role {role}: holds CREATEROLE, CREATEDB;" in out


def test_a_role_missing_what_the_vault_needs_fails(tmp_path, filled, make_role):
    role, url = make_role(schema_of(filled[0]), "", ("GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA {schema} "
                                                     "TO {role}",))
    code, out = doctor(tmp_path, url)
    assert code == 1
    assert f"FAIL  role {role} lacks what the vault needs: DELETE on chunks, DELETE on deletions" in out
    assert "USAGE on row_seq" in out.split("lacks")[1]


def test_the_role_owning_the_tables_is_warned_about(tmp_path, filled):
    code, out = doctor(tmp_path, filled[0])  # the app role made the tables, so it owns them
    assert code == 0, out
    assert "(it owns them)" in out and "WARN  role vault_app holds more than the vault needs: it owns" in out


def test_synchronous_commit_off_for_the_role_fails(tmp_path, filled, make_role, pg_test_database):
    role, url = make_role(schema_of(filled[0]), "", (GRANTS, "GRANT USAGE ON SEQUENCE {schema}.row_seq TO {role}"))
    pg_test_database.execute(sql.SQL("ALTER ROLE {} SET synchronous_commit = off").format(sql.Identifier(role)))
    code, out = doctor(tmp_path, url)
    assert code == 1 and "FAIL  synchronous_commit off: a crash can lose rows a put acknowledged" in out


def test_doctor_changes_nothing_in_a_schema_without_a_vault(tmp_path, pg_location):
    code, out = doctor(tmp_path, pg_location)
    assert code == 0 and "no vault here yet" in out and "no vault tables in this schema yet" in out
    with psycopg.connect(pg_location) as connection:
        assert connection.execute("SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()"
                                  ).fetchone() == (0,)


def test_an_unreachable_database_is_one_fail_line_without_the_password(tmp_path, pg_test_database):
    url = with_role(pg_test_database.admin_url, user="postgres", password="CANARY-PW-x", dbname="no_such_db")
    code, out = doctor(tmp_path, url)
    assert code == 1 and "FAIL  database: the PostgreSQL server could not be reached" in out
    assert "      database: postgresql://postgres@/no_such_db?host=/" in out
