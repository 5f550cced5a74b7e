"""The Citus cluster the Citus suites run against: the coordinator and two workers ``scripts/run test`` starts
(scripts/citus.sh), its superuser URLs in SCRATCHVAULT_TEST_CITUS (the coordinator) and
SCRATCHVAULT_TEST_CITUS_WORKERS (the workers, space-separated), all in one database with the extension made on every
node. With SCRATCHVAULT_CITUS_REQUIRED=1 a cluster that cannot be used fails the test; run by hand without one, the
tests skip.

Each test works in a schema of its own on the coordinator (Citus makes it on the workers too), dropped after it.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tests.support.components import Component
from tests.support.postgres import with_role

if TYPE_CHECKING:
    import psycopg

COORDINATOR_ENV = "SCRATCHVAULT_TEST_CITUS"
WORKERS_ENV = "SCRATCHVAULT_TEST_CITUS_WORKERS"
REQUIRED_ENV = "SCRATCHVAULT_CITUS_REQUIRED"


CITUS = Component("the Citus cluster", REQUIRED_ENV, f"run through 'bash scripts/run test' or set {COORDINATOR_ENV}")
unusable = CITUS.unusable
connect = CITUS.connect


@dataclass(frozen=True)
class CitusCluster:
    """The coordinator's and the workers' superuser URLs, all in the database that has the extension."""

    coordinator_url: str
    worker_urls: tuple[str, ...]

    def url(self, *, user: str | None = None, password: str | None = None, schema: str | None = None) -> str:
        """The coordinator's URL logging in as ``user`` (None: the superuser), ``schema`` first on its search_path."""
        database = self.coordinator_url.rsplit("/", 1)[1].split("?", 1)[0]
        return with_role(self.coordinator_url, user=user, password=password, dbname=database, schema=schema)


def cluster_from_environment() -> CitusCluster:
    """The harness's cluster, checked: the coordinator answers and has every worker active."""
    coordinator = os.environ.get(COORDINATOR_ENV)
    workers = tuple(os.environ.get(WORKERS_ENV, "").split())
    if not coordinator or not workers:
        unusable(f"{COORDINATOR_ENV} or {WORKERS_ENV} is not set")
    with connect(coordinator) as connection:
        active = connection.execute("SELECT count(*) FROM citus_get_active_worker_nodes()").fetchone()
    if active is None or active[0] != len(workers):
        unusable(f"the coordinator has {active and active[0]} active workers, not {len(workers)}")
    return CitusCluster(coordinator, workers)


@contextmanager
def scratch_schema(coordinator: psycopg.Connection, owner: str | None = None) -> Iterator[str]:
    """A fresh schema on the coordinator (``owner`` its owner, else the superuser), dropped with all it holds."""
    from psycopg import sql

    name = "citus_" + secrets.token_hex(6)
    authorization = sql.SQL(" AUTHORIZATION {}").format(sql.Identifier(owner)) if owner else sql.SQL("")
    coordinator.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)) + authorization)
    try:
        yield name
    finally:
        coordinator.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))
