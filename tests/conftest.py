"""Shared fixtures: an in-memory keyring, a controllable clock, vaults in private temp directories, and the
attacker's handle on a vault's store (tests/attacks/sqlite_attacker.py, or postgres_attacker.py when
SCRATCHVAULT_TEST_STORE=postgres runs the vault-level suites against PostgreSQL: tests/attacks/stores.py).
Tests marked ``sqlite_only`` are about the SQLite file itself; they are skipped, with their reason, on PostgreSQL.

A skip is never silent: each is reported at the end with its reason, and under ``bash scripts/run test``
(SCRATCHVAULT_STRICT_SKIPS=1) one that tests/allowed_skips.toml does not list fails the run (tests/support/skips.py).

Tests marked ``real_keyring`` use the OS keyring's Secret Service; ``scripts/run test`` starts one and sets
SCRATCHVAULT_REAL_KEYRING=1, in which case its absence is a failure, never a skip. Likewise the PostgreSQL
fixtures (``pg_location``, ``pg_admin``) use the throwaway cluster it starts (SCRATCHVAULT_TEST_POSTGRES) and fail
without one when SCRATCHVAULT_POSTGRES_REQUIRED=1; tests using them are marked ``postgres``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from keys.testing import MemoryKeyring
from tests.attacks.stores import STORE, attacker_class
from tests.support import citus_pass, skips
from tests.support.clock import FakeClock
from tests.support.fault_counts import silent_faults
from tests.support.openbao_fixtures import (  # noqa: F401 (fixtures)
    openbao_keyring,
    openbao_secret_id,
    openbao_server,
)
from tests.support.postgres import (
    ADMIN_URL_ENV,
    TestDatabase,
    app_schema,
    connect,
    create_test_database,
    drop_test_database,
    postgres_admin_url,
    unavailable,
)
from tests.support.skips import (  # noqa: F401 (hooks: every skip reported, unlisted ones fail a strict run)
    pytest_runtest_logreport,
    pytest_sessionfinish,
)
from tests.support.tiers import (  # noqa: F401 (hooks: the --quick and --store-tests-only options, the store marker)
    pytest_addoption,
    pytest_configure,
    select,
    uses_the_store_under_test,
)
from vault import Principal, Vault

if TYPE_CHECKING:
    import psycopg

    from tests.attacks.sqlite_attacker import SqliteAttacker

# helpers whose asserts are the tests' own: rewritten like a test module's, for the same failure messages
pytest.register_assert_rewrite("tests.attacks.sqlite_attacker", "tests.attacks.postgres_attacker",
                              "tests.attacks.tamper_world", "tests.storage.contract", "tests.system.crash_campaign",
                              "tests.system.crash_ops")


@pytest.fixture(autouse=True)
def every_armed_fault_fires() -> Iterator[None]:
    """A fault-injecting double (tests/support/fault_counts.py) armed in a test must have fired by its end."""
    silent_faults()
    yield
    assert silent_faults() == [], "a fault was set up that never fired: the test checked nothing about it"


@pytest.fixture
def keyring_backend(request: pytest.FixtureRequest) -> MemoryKeyring:
    """The in-memory keyring, or with SCRATCHVAULT_TEST_KEYRING=openbao one whose entries live in the OpenBao
    server (tests/support/openbao_fixtures.py), with the same ``secrets`` and ``reads``."""
    if os.environ.get("SCRATCHVAULT_TEST_KEYRING") == "openbao":
        return request.getfixturevalue("openbao_keyring")
    return MemoryKeyring()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def vault_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "vault"
    directory.mkdir(mode=0o700)
    return directory


# SCRATCHVAULT_TEST_STORE=postgres runs the vault-level suites against PostgreSQL: ``db_path`` is then a URL
@pytest.fixture
def db_path(vault_dir: Path, request: pytest.FixtureRequest) -> Path:
    if STORE == "postgres":
        return request.getfixturevalue("pg_schemas")("vault")
    return vault_dir / "scratchpad.db"


@pytest.fixture
def vault(db_path: Path, keyring_backend: MemoryKeyring, clock: FakeClock) -> Iterator[Vault]:
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as opened:
        yield opened


@pytest.fixture(scope="session")
def attacker_for(request: pytest.FixtureRequest) -> Iterator[type[SqliteAttacker]]:
    """The attacker of the store under test, made for a location (a path, or the ``db_path`` URL): SqliteAttacker
    or PostgresAttacker (in the session's test database), with the same operations; what it made for paths is
    released at the end."""
    chosen = attacker_class()
    if STORE == "postgres":
        from tests.attacks import pg_locations

        pg_locations.use(request.getfixturevalue("pg_test_database"))
    yield chosen
    chosen.discard()


@pytest.fixture
def attacker(attacker_for: type[SqliteAttacker], db_path: Path) -> SqliteAttacker:
    """The attacker's handle on the file of the ``vault`` fixture."""
    return attacker_for(db_path)


@pytest.fixture
def alice() -> Principal:
    return Principal("alice", actor="planner", channel="web")


@pytest.fixture
def bob() -> Principal:
    return Principal("bob", actor="planner", channel="web")


def real_keyring_required() -> bool:
    return os.environ.get("SCRATCHVAULT_REAL_KEYRING") == "1"


@pytest.fixture
def real_keyring():
    """The OS keyring's Secret Service backend; fails (not skips) when the test command promised one."""
    try:
        from keyring.backends import SecretService

        backend = SecretService.Keyring()
        if backend.priority < 1:
            raise RuntimeError("Secret Service priority < 1")
    except Exception as error:  # any reason it is unusable
        if real_keyring_required():
            pytest.fail(f"SCRATCHVAULT_REAL_KEYRING=1 but the Secret Service is unusable: {error!r}")
        pytest.skip(f"no Secret Service here ({error!r}); run through 'bash scripts/run test'")
    return backend


POSTGRES_FIXTURES = frozenset({"pg_test_database", "pg_schema", "pg_location", "pg_new_location", "pg_admin",
                               "pg_schemas"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test that uses the PostgreSQL server ``postgres`` (``-m "not postgres"`` runs without one) and
    every one the store under test may change ``store`` (tests/support/tiers.py); when
    SCRATCHVAULT_TEST_STORE=postgres, skip those about the SQLite file itself with their marker's reason. Then
    leave out what ``--quick`` or ``--store-tests-only`` does not take, and in the Citus pass what
    tests/support/citus_pass.py names."""
    for item in items:
        if POSTGRES_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.postgres)
        if "openbao_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.openbao)
        if "citus_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.citus)
        if uses_the_store_under_test(item):
            item.add_marker(pytest.mark.store)
        marker = item.get_closest_marker("sqlite_only")
        if STORE == "postgres" and marker is not None:
            item.add_marker(pytest.mark.skip(reason="sqlite_only: " + (marker.args[0] if marker.args else "")))
    select(config, items)
    citus_pass.leave_out(config, items)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Every skip with its reason (tests/support/skips.py), and what the Citus pass left out and why."""
    skips.pytest_terminal_summary(terminalreporter)
    citus_pass.report(terminalreporter)


@pytest.fixture(scope="session")
def pg_test_database() -> Iterator[TestDatabase]:
    """The session's test database and least-privilege role on the test server; skip (fail when required)
    without one."""
    url = postgres_admin_url()
    if url is None:
        unavailable(f"{ADMIN_URL_ENV} is not set")
    database = create_test_database(url)
    yield database
    drop_test_database(database)


@pytest.fixture
def pg_schema(pg_test_database: TestDatabase) -> Iterator[str]:
    """A fresh schema owned by the app role, dropped after the test."""
    with app_schema(pg_test_database) as schema:
        yield schema


@pytest.fixture
def pg_location(pg_test_database: TestDatabase, pg_schema: str) -> str:
    """A libpq URL logging in as the app role over the socket, its search_path the test's own schema."""
    return pg_test_database.url(schema=pg_schema)


@pytest.fixture
def pg_new_location(pg_test_database: TestDatabase) -> Iterator[Callable[[], str]]:
    """Makes further locations like ``pg_location``, each in a schema of its own, all dropped after the test."""
    with ExitStack() as schemas:
        yield lambda: pg_test_database.url(schema=schemas.enter_context(app_schema(pg_test_database)))


@pytest.fixture
def pg_schemas(pg_test_database: TestDatabase) -> Iterator[Callable[..., str]]:
    """``pg_schemas(name)``: a location like ``pg_location`` in a schema of its own, the same one for the same
    name (a store opened again), all dropped after the test."""
    made: dict[str, str] = {}
    with ExitStack() as schemas:
        def location(name: str = "store") -> str:
            if name not in made:
                made[name] = pg_test_database.url(schema=schemas.enter_context(app_schema(pg_test_database)))
            return made[name]

        yield location


@pytest.fixture
def pg_admin(pg_test_database: TestDatabase, pg_schema: str) -> Iterator[psycopg.Connection]:
    """The superuser (autocommit) in the test database, ``pg_location``'s schema first on its search_path: the
    attacker with the server's keys, and the canary scans."""
    with connect(pg_test_database.url(superuser=True, schema=pg_schema)) as connection:
        yield connection


@pytest.fixture
def location_named(vault_dir: Path, request: pytest.FixtureRequest) -> Callable[[str], str | Path]:
    """Another location beside ``db_path``, by name: a file in the same directory, or on PostgreSQL (with
    SCRATCHVAULT_TEST_STORE=postgres) a schema of its own. A backup copy or a second vault goes there."""
    if STORE == "postgres":
        return request.getfixturevalue("pg_schemas")
    return lambda name: vault_dir / name
