"""Temporary: schemas on the server SCRATCHVAULT_TEST_POSTGRES names (replaced by tests/support/postgres.py)."""

import os
import secrets
import urllib.parse

import psycopg
import pytest


@pytest.fixture
def pg_schemas():
    base = os.environ.get("SCRATCHVAULT_TEST_POSTGRES")
    if not base:
        pytest.skip("no PostgreSQL server")
    made = {}

    def url(name="store"):
        if name not in made:
            schema = f"t_{secrets.token_hex(6)}"
            with psycopg.connect(base, autocommit=True) as connection:
                connection.execute(f"CREATE SCHEMA {schema}")
            made[name] = schema
        sep = "&" if "?" in base else "?"
        return base + sep + "options=" + urllib.parse.quote(f"-csearch_path={made[name]}")

    yield url
    with psycopg.connect(base, autocommit=True) as connection:
        for schema in made.values():
            connection.execute(f"DROP SCHEMA {schema} CASCADE")
