"""The ``scratchvault`` command with ``--db postgresql://...``: every subcommand works on the URL, and the URL's
password shows in no output, error line or audit record (the test's URL carries a password made for it)."""

from __future__ import annotations

import json

import psycopg
import pytest

from tests.ops.test_cli import CONTENT, TURN, USER, Cli, assert_fails
from tests.support.postgres import with_role
from vault.storage.postgres.schema import SCHEMA_VERSION as POSTGRES_SCHEMA


@pytest.fixture
def cli(tmp_path, pg_location) -> Cli:
    return Cli(tmp_path, pg_location)


def password_of(url: str) -> str:
    password = psycopg.conninfo.conninfo_to_dict(url)["password"]
    assert len(password) >= 16
    return password


def assert_no_password(cli: Cli, *results) -> None:
    password = password_of(cli.db)
    for result in results:
        assert password not in result.stdout.decode() + result.stderr.decode()
    assert not cli.audit.exists() or password not in cli.audit.read_text()


def test_every_subcommand_takes_the_url_and_never_shows_its_password(cli):
    runs = [cli.run("put", "--user", USER, "--turn", TURN, stdin=CONTENT.encode())]
    row = runs[0].stdout.decode().strip()
    ok = {"read": ("read", "--user", USER, row, "--n", "6"), "list": ("list", "--user", USER, "--turn", TURN),
          "stats": ("stats",), "rotate": ("keys", "rotate", "--user", USER), "rewrap": ("keys", "rewrap"),
          "retire": ("keys", "retire", "--user", USER), "maintain": ("maintain",), "gc": ("gc",),
          "tag": ("audit-tag", "--user", USER), "delete": ("delete", "--user", USER, row),
          "shred": ("keys", "shred", "--user", USER, "--yes")}
    results = {name: cli.run(*args) for name, args in ok.items()}
    for name, result in results.items():
        assert result.returncode == 0, (name, result.stderr)
    assert results["read"].stdout.decode() == CONTENT[:6] + "\n"
    stats = results["stats"].stdout.decode()
    assert "disk            not visible from here (the PostgreSQL server keeps its own" in stats
    assert "keys of 1 of 1 owner(s) rotated, 1 row(s) re-wrapped, 1 key version(s) retired" in (
        results["maintain"].stdout.decode())
    assert cli.records() and all(record["outcome"] == "ok" for record in cli.records())
    assert_no_password(cli, *runs, *results.values())


def test_json_output_of_stats_and_maintain_on_postgres(cli):
    cli.put()
    stats = json.loads(cli.ok("stats", "--json"))
    assert stats["rows"] == 1 and stats["disk"] == {"free_bytes": None, "reserve_bytes": 0, "ballast_bytes": 0,
                                                    "file_system_bytes": None}
    done = json.loads(cli.ok("maintain", "--json"))
    assert done == {"owners": 1, "expired_removed": 0, "maintained": 1, "rewrapped": 1, "retired": 1, "failed": []}
    assert json.loads(cli.ok("stats", "--json"))["by_key_version"] == {"2": {"rows": 1, "bytes": len(CONTENT)}}


def test_doctor_and_demo_on_the_url(cli):
    cli.put()
    doctor = cli.run("doctor")
    assert "ok    connection: local Unix socket" in doctor.stdout.decode() and f"schema version {POSTGRES_SCHEMA}" in (
        doctor.stdout.decode())
    demo = cli.run("demo")
    transcript = demo.stdout.decode()
    assert demo.returncode == 0, demo.stderr
    assert "bob's row in the backup copy: unreadable (KeyUnavailable" in transcript
    assert "plaintext canaries found in what the server stores in the vault's tables: none" in transcript
    assert_no_password(cli, doctor, demo)


def test_a_url_without_a_vault_is_refused_and_left_empty(cli, pg_admin):
    result = cli.run("stats")
    assert_fails(result, 5, "no database with a vault at postgresql://vault_app@/scratchvault_test?host=/")
    assert pg_admin.execute("SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()").fetchone() == (0,)
    assert_no_password(cli, result)


def test_failures_on_a_url_are_one_line_without_the_password(tmp_path, pg_test_database):
    wrong = with_role(pg_test_database.admin_url, user="vault_app", password="CANARY-PW-0123456789",
                      dbname="no_such_database")
    cli = Cli(tmp_path, wrong)
    results = [cli.run("stats"), cli.run("gc", "--json"), cli.run("maintain")]
    for result in results:
        assert_fails(result, 5, "StorageError")
    assert_no_password(cli, *results)
    unparsable = Cli(tmp_path, "postgresql://vault_app:CANARY-PW-0123456789@[::1/x")
    result = unparsable.run("stats")
    assert_fails(result, 2, "the PostgreSQL URL cannot be parsed")
    assert "CANARY-PW" not in result.stderr.decode()
    other = Cli(tmp_path, "mysql://root:CANARY-PW-0123456789@localhost/db").run("doctor")
    assert_fails(other, 2, "InvalidArgument")
    assert "CANARY-PW" not in other.stderr.decode() + other.stdout.decode()
