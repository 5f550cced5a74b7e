"""Fixtures of the Citus suites (tests/support/citus.py): the cluster, the coordinator's superuser, a scratch schema
per test. A test using them is marked ``citus`` (tests/conftest.py); ``scripts/run test`` runs this folder in a pass
of its own, after the PostgreSQL pass, and ``--quick`` leaves it out."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from tests.support.citus import CitusCluster, cluster_from_environment, connect, scratch_schema


@pytest.fixture(scope="session")
def citus_cluster() -> CitusCluster:
    return cluster_from_environment()


@pytest.fixture
def citus_admin(citus_cluster: CitusCluster) -> Iterator[psycopg.Connection]:
    """The superuser on the coordinator (autocommit)."""
    with connect(citus_cluster.coordinator_url) as connection:
        yield connection


@pytest.fixture
def citus_schema(citus_admin: psycopg.Connection) -> Iterator[str]:
    """A schema of the test's own on the coordinator, dropped with everything in it afterwards."""
    with scratch_schema(citus_admin) as name:
        yield name
