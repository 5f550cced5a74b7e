"""The Citus cluster the Citus suites run against: the coordinator and two workers ``scripts/run test`` starts
(scripts/citus.sh), its superuser URLs in SCRATCHVAULT_TEST_CITUS (the coordinator) and
SCRATCHVAULT_TEST_CITUS_WORKERS (the workers, space-separated), all in one database with the extension made on every
node; their data directories (coordinator first) in SCRATCHVAULT_TEST_CITUS_PGDATA and their ``pg_ctl`` in
SCRATCHVAULT_TEST_CITUS_PGCTL, for the tests that read the files or stop a node (tests/support/citus_nodes.py).
With SCRATCHVAULT_CITUS_REQUIRED=1 a cluster that cannot be used fails the test; run by hand without one, the tests
skip.

Each test works in a schema of its own on the coordinator (Citus makes it on the workers too), dropped after it.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tests.support.components import Component
from tests.support.postgres import with_role

if TYPE_CHECKING:
    import psycopg

COORDINATOR_ENV = "SCRATCHVAULT_TEST_CITUS"
WORKERS_ENV = "SCRATCHVAULT_TEST_CITUS_WORKERS"
REQUIRED_ENV = "SCRATCHVAULT_CITUS_REQUIRED"
PGDATA_ENV = "SCRATCHVAULT_TEST_CITUS_PGDATA"
PGCTL_ENV = "SCRATCHVAULT_TEST_CITUS_PGCTL"


CITUS = Component("the Citus cluster", REQUIRED_ENV, f"run through 'bash scripts/run test' or set {COORDINATOR_ENV}")
unusable = CITUS.unusable
connect = CITUS.connect


@dataclass(frozen=True)
class CitusCluster:
    """The coordinator's and the workers' superuser URLs, all in the database that has the extension, and, when the
    harness gave them, the nodes' data directories (in the same order, coordinator first) and ``pg_ctl``."""

    coordinator_url: str
    worker_urls: tuple[str, ...]
    data_dirs: tuple[Path, ...] = field(default=())
    pg_ctl: Path | None = None

    @property
    def node_urls(self) -> tuple[str, ...]:
        """Every node's superuser URL, coordinator first."""
        return (self.coordinator_url, *self.worker_urls)

    def files(self) -> tuple[tuple[Path, ...], Path]:
        """The nodes' data directories (coordinator first) and ``pg_ctl``; skip or fail without them."""
        if len(self.data_dirs) != len(self.node_urls) or self.pg_ctl is None:
            unusable(f"{PGDATA_ENV} (one data directory a node) or {PGCTL_ENV} is not set")
        return self.data_dirs, self.pg_ctl

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
    pg_ctl = os.environ.get(PGCTL_ENV)
    return CitusCluster(coordinator, workers, tuple(Path(each) for each in os.environ.get(PGDATA_ENV, "").split()),
                        Path(pg_ctl) if pg_ctl else None)


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
