"""Fixtures of the attack tests."""

from __future__ import annotations

import pytest

from tests.attacks import pg_locations
from tests.attacks.postgres_attacker import PostgresAttacker


@pytest.fixture
def pg(pg_test_database, pg_location) -> PostgresAttacker:
    """The attacker (a superuser) on the schema of ``pg_location``, where the vault runs as the app role."""
    pg_locations.use(pg_test_database)
    return PostgresAttacker(pg_location)
