"""The PostgreSQL server the PostgreSQL suites run against: the throwaway cluster ``scripts/run test`` starts
(its superuser URL in SCRATCHVAULT_TEST_POSTGRES), one test database with a least-privilege role, and a fresh
schema per test owned by that role, so each test starts from an empty store and none sees another's tables.

Citus mode: when the admin URL's own database has the ``citus`` extension (a Citus coordinator: the Citus pass of
scripts/citus.sh points SCRATCHVAULT_TEST_POSTGRES at its database), the suites use that database instead of making
one: a new database would have no extension and not be known to the workers, so the vault would never be
distributed. The role is made there (Citus makes it, and each schema, on the workers too), and what it owns is
dropped at the end of the session instead of the database. SCRATCHVAULT_TEST_POSTGRES_CITUS=1 (set by that pass)
promises Citus: a server without the extension then fails the tests instead of silently running on plain PostgreSQL.

psycopg is imported inside functions: the module imports (and the suites skip cleanly) without it.
"""

from __future__ import annotations

import os
import secrets
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from tests.support.components import Component

if TYPE_CHECKING:
    import psycopg

ADMIN_URL_ENV = "SCRATCHVAULT_TEST_POSTGRES"
REQUIRED_ENV = "SCRATCHVAULT_POSTGRES_REQUIRED"
PGDATA_ENV = "SCRATCHVAULT_TEST_PGDATA"
PGCTL_ENV = "SCRATCHVAULT_TEST_PGCTL"
CITUS_ENV = "SCRATCHVAULT_TEST_POSTGRES_CITUS"
TEST_DATABASE = "scratchvault_test"
APP_ROLE = "vault_app"
# how long a schema's DROP waits for a lock before the app role's leftover sessions are ended
DROP_LOCK_TIMEOUT = "2s"


def postgres_admin_url() -> str | None:
    """The superuser's libpq URL of the test server, None when none is configured."""
    return os.environ.get(ADMIN_URL_ENV) or None


POSTGRES = Component("the PostgreSQL server", REQUIRED_ENV,
                     f"run through 'bash scripts/run test' or set {ADMIN_URL_ENV}")
postgres_required = POSTGRES.required
unavailable = POSTGRES.unusable
connect = POSTGRES.connect


def with_role(url: str, *, user: str | None, password: str | None, dbname: str, schema: str | None = None) -> str:
    """``url`` (a libpq URL) rewritten to log in to ``dbname`` as ``user`` (None: the URL's own login), with
    ``schema`` as the search_path."""
    parts = urlsplit(url)
    login, _, host = parts.netloc.rpartition("@")
    if user is not None:
        login = quote(user, safe="") + (":" + quote(password, safe="") if password else "")
    drop = {"dbname", "options"} | ({"user", "password"} if user is not None else set())
    query = [(k, v) for k, v in parse_qsl(parts.query) if k not in drop]
    if schema is not None:
        query.append(("options", f"-csearch_path={schema}"))
    netloc = f"{login}@{host}" if login else host
    return urlunsplit((parts.scheme, netloc, "/" + quote(dbname, safe=""), urlencode(query, safe="/"), ""))


@dataclass
class TestDatabase:
    """The session's test database and app role, and a superuser connection to it (reopened after a test
    restarted the server)."""

    __test__ = False  # not a test class, whatever its name
    admin_url: str
    app_password: str
    name: str = TEST_DATABASE
    citus: bool = False  # the Citus coordinator's own database (the module's docstring), not one made for the tests
    admin: psycopg.Connection | None = None

    def url(self, *, superuser: bool = False, schema: str | None = None) -> str:
        """A URL to the test database as the app role (or the superuser), ``schema`` first on its search_path."""
        user, password = (None, None) if superuser else (APP_ROLE, self.app_password)
        return with_role(self.admin_url, user=user, password=password, dbname=self.name, schema=schema)

    def execute(self, statement, params=None) -> None:
        """Run one statement as the superuser in the test database, reconnecting once if the server restarted."""
        import psycopg

        for attempt in (1, 2):
            if self.admin is None or self.admin.closed or self.admin.broken:
                self.admin = connect(self.url(superuser=True))
            try:
                self.admin.execute(statement, params)
                return
            except psycopg.OperationalError:
                if attempt == 2 or not self.admin.broken:
                    raise
                self.admin = None


def citus_required() -> bool:
    """True when the test command promised a Citus coordinator (SCRATCHVAULT_TEST_POSTGRES_CITUS=1)."""
    return os.environ.get(CITUS_ENV) == "1"


def create_test_database(admin_url: str) -> TestDatabase:
    """A fresh test database (on Citus, the coordinator's own, emptied of what the app role owned) and the
    least-privilege login role the vault runs as: no superuser, no CREATEDB or CREATEROLE, owning nothing; it may
    connect to the database and create its schemas there."""
    from psycopg import sql

    password = secrets.token_urlsafe(18)
    with connect(admin_url) as admin:
        citus = admin.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'").fetchone() is not None
        if citus_required() and not citus:
            unavailable(f"{CITUS_ENV}=1 but the database of {ADMIN_URL_ENV} has no citus extension")
        exists = admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [APP_ROLE]).fetchone()
        if citus:
            (name,) = admin.execute("SELECT current_database()").fetchone()
            if exists:
                admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(APP_ROLE)))
        else:
            name = TEST_DATABASE
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        verb = "ALTER" if exists else "CREATE"
        admin.execute(sql.SQL(verb + " ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION"
                              " NOBYPASSRLS PASSWORD {}").format(sql.Identifier(APP_ROLE), sql.Literal(password)))
        admin.execute(sql.SQL("GRANT CONNECT, CREATE ON DATABASE {} TO {}").format(
            sql.Identifier(name), sql.Identifier(APP_ROLE)))
    return TestDatabase(admin_url, password, name=name, citus=citus)


def drop_test_database(database: TestDatabase) -> None:
    """Drop the test database at the end of the session, ending any session a test left open; on Citus drop what
    the app role owns in the coordinator's database (schemas a test left) and its grants there instead."""
    from psycopg import sql

    if database.admin is not None:
        database.admin.close()
    with connect(database.admin_url) as admin:
        if database.citus:
            admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(APP_ROLE)))
        else:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database.name)))


@contextmanager
def app_schema(database: TestDatabase) -> Iterator[str]:
    """A fresh schema owned by the app role, dropped with everything in it afterwards (also when the body
    raises). Sessions of the app role still open then are ended, with a warning: a test leaked them.

    Not one shared schema truncated between tests: that is faster (a test's set-up, open, put, read, close and
    tear-down took some 10-30 ms less of ~80-150 ms), but a truncated schema still holds the vault's tables, so the
    store's first open (its DDL and migrations), its check for objects it did not make, and the tests that plant
    objects or lay out an older version before that open would no longer start where a new deployment starts; and
    what an attack test altered (a column, a constraint, a grant, an owner) would have to be found in the catalog."""
    import psycopg
    from psycopg import sql

    name = "t_" + secrets.token_hex(6)
    ident = sql.Identifier(name)
    database.execute(sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(ident, sql.Identifier(APP_ROLE)))
    try:
        yield name
    finally:
        drop = sql.SQL("SET lock_timeout = {}; DROP SCHEMA {} CASCADE; RESET lock_timeout").format(
            sql.Literal(DROP_LOCK_TIMEOUT), ident)
        try:
            database.execute(drop)
        except psycopg.errors.LockNotAvailable:
            database.execute("RESET lock_timeout")
            warnings.warn(f"a test left sessions of {APP_ROLE} open on schema {name}; ending them", stacklevel=1)
            database.execute("SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity"
                             " WHERE usename = %s AND datname = %s", [APP_ROLE, database.name])
            database.execute(drop)
