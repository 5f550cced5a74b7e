"""The PostgreSQL test harness does what the PostgreSQL suites rely on: a location is a fresh schema of its own,
reached as a role that can do nothing but build its store there; the schema is gone after the test, also when the
test failed; and a missing server fails the run that promised one instead of skipping."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors, sql

from tests.support import postgres
from tests.support.postgres import APP_ROLE, TEST_DATABASE, TestDatabase, app_schema


def schema_exists(admin: psycopg.Connection, name: str) -> bool:
    return admin.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", [name]).fetchone() is not None


def test_a_location_logs_in_as_the_app_role_into_its_own_schema(pg_test_database, pg_location, pg_schema, pg_admin):
    with psycopg.connect(pg_location) as app:
        row = app.execute("SELECT current_user, current_database(), current_schema()").fetchone()
        assert row == (APP_ROLE, pg_test_database.name, pg_schema)
        app.execute("CREATE TABLE rows (seq bigint PRIMARY KEY)")  # unqualified: lands in the test's schema
    owner = pg_admin.execute("SELECT tableowner FROM pg_tables WHERE schemaname = %s AND tablename = 'rows'",
                             [pg_schema]).fetchone()
    assert owner == (APP_ROLE,)


def test_the_app_role_holds_nothing_beyond_its_database_and_schemas(pg_location, pg_admin):
    flags = pg_admin.execute("SELECT rolsuper, rolcreatedb, rolcreaterole, rolreplication, rolbypassrls, rolcanlogin"
                             " FROM pg_roles WHERE rolname = %s", [APP_ROLE]).fetchone()
    assert flags == (False, False, False, False, False, True)
    with psycopg.connect(pg_location, autocommit=True) as app:
        for statement in ("CREATE DATABASE stolen", "CREATE ROLE stolen", "CREATE TABLE public.stolen (x int)",
                          "COPY (SELECT 1) TO '/tmp/stolen'", "SELECT pg_read_file('PG_VERSION')"):
            with pytest.raises(errors.InsufficientPrivilege):
                app.execute(statement)


def test_each_new_location_is_a_schema_of_its_own(pg_new_location):
    first, second = pg_new_location(), pg_new_location()
    with psycopg.connect(first) as app:
        app.execute("CREATE TABLE rows (seq bigint)")
        first_schema = app.execute("SELECT current_schema()").fetchone()[0]
    with psycopg.connect(second) as app:
        assert app.execute("SELECT current_schema()").fetchone()[0] not in (None, first_schema)
        assert app.execute("SELECT to_regclass('rows')").fetchone() == (None,)


def test_the_admin_is_the_superuser_in_autocommit_seeing_the_test_schema(pg_location, pg_admin):
    with psycopg.connect(pg_location) as app:
        app.execute("CREATE TABLE rows (seq bigint)")
        app.execute("INSERT INTO rows VALUES (7)")
    assert pg_admin.autocommit
    assert pg_admin.execute("SHOW is_superuser").fetchone() == ("on",)
    assert pg_admin.execute("SELECT seq FROM rows").fetchall() == [(7,)]


def test_a_schema_is_dropped_with_its_tables_when_the_test_fails(pg_test_database: TestDatabase, pg_admin):
    with pytest.raises(RuntimeError), app_schema(pg_test_database) as name:
        with psycopg.connect(pg_test_database.url(schema=name)) as app:
            app.execute("CREATE TABLE rows (seq bigint)")
        assert schema_exists(pg_admin, name)
        raise RuntimeError("the test failed")
    assert not schema_exists(pg_admin, name)


def test_a_session_left_open_by_a_test_is_ended_so_its_schema_still_goes(pg_test_database, pg_admin, monkeypatch):
    monkeypatch.setattr(postgres, "DROP_LOCK_TIMEOUT", "50ms")
    with pytest.warns(UserWarning, match="left sessions"), app_schema(pg_test_database) as name:
        leaked = psycopg.connect(pg_test_database.url(schema=name))
        leaked.execute("CREATE TABLE rows (seq bigint)")  # the open transaction holds a lock DROP waits for
    assert not schema_exists(pg_admin, name)
    with pytest.raises(psycopg.OperationalError):
        leaked.execute("SELECT 1")
    leaked.close()


@pytest.mark.parametrize("required", [True, False])
def test_a_missing_server_fails_when_the_test_command_promised_one(monkeypatch, required):
    monkeypatch.delenv(postgres.ADMIN_URL_ENV, raising=False)
    monkeypatch.setenv(postgres.REQUIRED_ENV, "1" if required else "0")
    assert postgres.postgres_admin_url() is None
    with pytest.raises(BaseException, match="PostgreSQL") as outcome:  # pytest's skip and fail are BaseExceptions
        postgres.unavailable("SCRATCHVAULT_TEST_POSTGRES is not set")
    assert outcome.type is (pytest.fail.Exception if required else pytest.skip.Exception)


def test_an_unreachable_server_fails_when_required(monkeypatch, tmp_path):
    monkeypatch.setenv(postgres.REQUIRED_ENV, "1")
    with pytest.raises(BaseException, match="cannot connect") as outcome:
        postgres.connect(f"postgresql://postgres@/postgres?host={tmp_path}&connect_timeout=2")
    assert outcome.type is pytest.fail.Exception


def worker_views(admin: psycopg.Connection, schema: str) -> list[str]:
    """What each worker holds of the app role (any of superuser, createdb, createrole), its CREATE grant on the
    database and the owner of ``schema``, one line a worker, as Citus runs the query there."""
    query = sql.SQL("SELECT concat_ws(' ', (SELECT rolsuper OR rolcreatedb OR rolcreaterole FROM pg_roles "
                    "WHERE rolname = {role}), has_database_privilege({role}, current_database(), 'CREATE'), "
                    "(SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = {schema}))").format(
        role=sql.Literal(APP_ROLE), schema=sql.Literal(schema)).as_string(admin)
    return [row[0] for row in admin.execute("SELECT result FROM run_command_on_workers(%s)", [query])]


def test_on_a_citus_coordinator_its_own_database_is_used_and_role_grant_and_schema_reach_the_workers(
        pg_test_database: TestDatabase, pg_schema, pg_admin):
    """The Citus mode of tests/support/postgres.py: exactly when the server's database has the extension, the
    suites run in that database (a new one would not be on the workers), and every worker has the app role as
    the coordinator has it, its grant on the database, and the test's schema owned by it."""
    citus = pg_admin.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'").fetchone() is not None
    assert pg_test_database.citus is citus
    (database,) = pg_admin.execute("SELECT current_database()").fetchone()
    assert database == pg_test_database.name
    if not citus:
        assert database == TEST_DATABASE
        return
    assert database == psycopg.conninfo.conninfo_to_dict(pg_test_database.admin_url)["dbname"]
    workers = pg_admin.execute("SELECT count(*) FROM citus_get_active_worker_nodes()").fetchone()[0]
    assert workers >= 2 and worker_views(pg_admin, pg_schema) == [f"f t {APP_ROLE}"] * workers
