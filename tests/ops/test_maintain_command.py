"""``scratchvault maintain`` on the command line (SQLite; tests/ops/test_cli_postgres.py runs it on PostgreSQL):
an owner whose maintenance fails is named by audit tag, the exit code is its error's, the others are done."""

from __future__ import annotations

import json

from tests.ops.test_cli import CONTENT, TURN, USER, assert_fails
from tests.ops.test_cli import cli as cli  # a fixture


def test_maintain_names_a_failed_owner_by_audit_tag_exits_with_its_error_and_maintains_the_rest(cli, attacker):
    damaged = cli.put()
    bobs = cli.ok("put", "--user", "bob", "--turn", TURN, stdin=b"bob's").strip()
    attacker.flip_at(attacker.seq_of(damaged), "wrapped_key", 5)
    result = cli.run("maintain", "--json")
    assert_fails(result, 4, "key maintenance failed for 1 of 2 owner(s)")
    report = json.loads(result.stdout)
    (failed,) = report.pop("failed")
    assert report == {"owners": 2, "expired_removed": 0, "maintained": 1, "rewrapped": 1, "retired": 1}
    tag = json.loads(cli.ok("audit-tag", "--user", USER, "--json"))["user"]
    assert (failed["user"], failed["error"]) == (tag, "IntegrityError") and damaged in failed["message"]
    assert cli.ok("read", "--user", "bob", bobs) == "bob's\n"
    assert json.loads(cli.ok("stats", "--json"))["by_key_version"] == {"1": {"rows": 1, "bytes": len(CONTENT)},
                                                                      "2": {"rows": 1, "bytes": 5}}
