"""The ``scratchvault`` command, run as a subprocess against a real database and a file-backed test keyring
(tests/support/file_keyring.py, chosen through PYTHON_KEYRING_BACKEND as an operator would choose a backend)."""

from __future__ import annotations

import base64
import json
import os
import pty
import re
import select
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.file_keyring import load, save
from tests.support.repository import ROOT, child_env
from vault.ops import cli as cli_module
from vault.ops import commands

CONTENT = "CANARY-CONTENT-q7 " * 300
USER, TURN, EXECUTOR = "CANARY-USER-alice", "CANARY-TURN-9", "CANARY-EXEC-fetch"
CANARIES = ("CANARY", "q7", "alice")


class Cli:
    """Runs ``python -m vault`` with one database, one keyring file and one audit log."""

    def __init__(self, root: Path, db: Path) -> None:
        self.db, self.keyring, self.audit = db, root / "keyring.json", root / "audit.log"
        self.env = {**child_env(), "PYTHON_KEYRING_BACKEND": "tests.support.file_keyring.FileKeyring",
                    "SCRATCHVAULT_TEST_KEYRING": str(self.keyring), "SCRATCHVAULT_AUDIT_LOG": str(self.audit)}

    def run(self, *args: str, stdin: bytes = b"", db: bool = True, **popen) -> subprocess.CompletedProcess:
        where = ["--db", str(self.db)] if db else []
        return subprocess.run([sys.executable, "-m", "vault", *args, *where], cwd=ROOT, env=self.env, input=stdin,
                              capture_output="stderr" not in popen, timeout=60, check=False, **popen)

    def ok(self, *args: str, stdin: bytes = b"") -> str:
        result = self.run(*args, stdin=stdin)
        assert result.returncode == 0, result.stderr
        return result.stdout.decode()

    def put(self, text: str = CONTENT, *extra: str) -> str:
        put = ("put", "--user", USER, "--turn", TURN, "--executor", EXECUTOR, *extra)
        return self.ok(*put, stdin=text.encode()).strip()

    def records(self) -> list[dict]:
        return [json.loads(line) for line in self.audit.read_text().splitlines()]


def assert_fails(result: subprocess.CompletedProcess, code: int, kind: str) -> None:
    """The failure contract: the exit code, one line on stderr naming the kind, no traceback, no canary."""
    stderr = result.stderr.decode()
    assert result.returncode == code, stderr
    assert len(stderr.strip().splitlines()) == 1 and kind in stderr and "Traceback" not in stderr
    assert not any(canary in stderr + result.stdout.decode() for canary in CANARIES)


@pytest.fixture
def cli(tmp_path: Path, db_path: Path) -> Cli:
    return Cli(tmp_path, db_path)


def test_put_read_list_delete_round_trip(cli):
    row = cli.put(CONTENT, "--step", "3")
    assert re.fullmatch(r"[0-9a-f]{32}", row)
    assert cli.ok("read", "--user", USER, row, "--mode", "full") == CONTENT + "\n"
    window = ("--mode", "range", "--start", "0", "--end", "14", "--raw")
    assert cli.ok("read", "--user", USER, row, *window) == CONTENT[:14]
    listed = cli.ok("list", "--user", USER, "--turn", TURN)
    assert row in listed and "step 3" in listed and EXECUTOR in listed
    assert cli.ok("delete", "--user", USER, row).strip() == f"deleted {row}"
    assert_fails(cli.run("read", "--user", USER, row), 1, "NotFound")


def test_binary_from_a_file_reads_back_exactly_raw_and_as_base64_json(cli, tmp_path):
    blob = bytes(range(256)) * 300
    (tmp_path / "blob.bin").write_bytes(blob)
    row = cli.ok("put", "--user", USER, "--turn", TURN, "--kind", "binary", str(tmp_path / "blob.bin")).strip()
    raw = cli.run("read", "--user", USER, row, "--mode", "full", "--raw", "--max-read", "100000")
    assert raw.returncode == 0 and raw.stdout == blob
    shown = json.loads(cli.ok("read", "--user", USER, row, "--n", "8"))
    assert (shown["encoding"], base64.b64decode(shown["content"])) == ("base64", blob[:8])


def test_json_kind_is_parsed_and_non_utf8_text_is_refused(cli):
    row = cli.ok("put", "--user", USER, "--turn", TURN, "--kind", "json", stdin=b'{"k": [1, 2]}').strip()
    assert json.loads(cli.ok("read", "--user", USER, row, "--mode", "full")) == {"k": [1, 2]}
    assert_fails(cli.run("put", "--user", USER, "--turn", TURN, stdin=b"\xff\xfe CANARY"), 2, "InvalidArgument")


def test_json_output_of_every_command_parses(cli):
    rep = json.loads(cli.ok("put", "--user", USER, "--turn", TURN, "--json", stdin=CONTENT.encode()))
    assert rep["content_kind"] == "text" and rep["size_bytes"] == len(CONTENT)
    read = json.loads(cli.ok("read", "--user", USER, rep["id"], "--n", "5", "--json"))
    assert (read["content"], read["full_size"], read["truncated"]) == (CONTENT[:5], len(CONTENT), False)
    assert [r["id"] for r in json.loads(cli.ok("list", "--user", USER, "--turn", TURN, "--json"))] == [rep["id"]]
    stats = json.loads(cli.ok("stats", "--json"))
    assert (stats["rows"], stats["by_key_version"]) == (1, {"1": {"rows": 1, "bytes": len(CONTENT)}})
    assert stats["disk"]["reserve_bytes"] >= 64 << 20 and stats["quotas"]["owner_max_rows"] is None
    assert re.search(r"^disk +[\d,]+ bytes free, reserve [\d,]+ \(ballast 1,048,576\)$", cli.ok("stats"), re.M)
    assert json.loads(cli.ok("keys", "rotate", "--user", USER, "--json")) == {"key_version": 2}
    assert json.loads(cli.ok("keys", "rewrap", "--json")) == {"rewrapped": 1}
    assert json.loads(cli.ok("keys", "retire", "--user", USER, "--json")) == {"retired": 1}
    assert set(json.loads(cli.ok("audit-tag", "--user", USER, "--turn", TURN, "--json"))) == {"user", "turn"}
    assert json.loads(cli.ok("gc", "--json")) == {"removed": 0}
    assert json.loads(cli.ok("delete", "--user", USER, rep["id"], "--json")) == {"deleted": rep["id"]}
    assert json.loads(cli.ok("keys", "shred", "--user", USER, "--yes", "--json")) == {"deleted_rows": 0}
    doctor = json.loads(cli.ok("doctor", "--json"))
    assert doctor["safe"] is True and any("file_keyring.FileKeyring" in line for line in doctor["report"])
    error = cli.run("read", "--user", USER, rep["id"], "--json")
    assert error.returncode == 1 and json.loads(error.stderr) == {"error": "NotFound", "message": "no such observation",
                                                                  "exit_code": 1}


def test_another_users_id_is_exit_1_exactly_like_a_missing_one(cli):
    row = cli.put()
    foreign = cli.run("read", "--user", "bob", row)
    missing = cli.run("read", "--user", "bob", "0" * 32)
    malformed = cli.run("delete", "--user", "bob", "not-an-id")
    for result in (foreign, missing, malformed):
        assert_fails(result, 1, "NotFound")
    assert foreign.stderr == missing.stderr == malformed.stderr
    assert cli.ok("read", "--user", USER, row, "--n", "6") == CONTENT[:6] + "\n"  # untouched


@pytest.mark.parametrize("args", [
    ("read",), ("frobnicate",), ("keys",), ("put", "--turn", "t"), ("read", "--user", "u", "x", "--mode", "middle"),
    ("read", "--user", "u", "x", "--n", "many"), ("gc", "--unknown"),
])
def test_usage_errors_exit_2_in_one_line(cli, args):
    result = cli.run(*args)
    assert_fails(result, 2, "error:")


def test_invalid_arguments_exit_2_and_store_nothing(cli, tmp_path):
    row = cli.put()
    for args, stdin in [(("read", "--user", USER, row, "--n", "-1"), b""),
                        (("read", "--user", USER, row, "--start", "1"), b""),
                        (("put", "--user", USER, "--turn", TURN, "--ttl", "nan"), b"x"),
                        (("put", "--user", USER, "--turn", TURN, "--kind", "json"), b'{"CANARY": '),
                        (("put", "--user", USER, "--turn", TURN, "--kind", "json"), b'"a scalar"'),
                        (("put", "--user", USER, "--turn", TURN, str(tmp_path / "absent")), b""),
                        (("keys", "shred", "--user", USER), b""),
                        (("audit-tag",), b"")]:
        assert_fails(cli.run(*args, stdin=stdin), 2, "InvalidArgument")
    assert json.loads(cli.ok("stats", "--json"))["rows"] == 1  # nothing stored, nothing shredded


def test_deleted_keyring_entries_are_exit_3(cli):
    row = cli.put()
    secrets = load(cli.keyring)
    save(cli.keyring, {name: value for name, value in secrets.items() if "/owner-key\0" not in name})
    assert_fails(cli.run("read", "--user", USER, row), 3, "KeyUnavailable")
    save(cli.keyring, {})
    assert_fails(cli.run("stats"), 3, "KeyUnavailable")
    save(cli.keyring, secrets)
    assert cli.ok("read", "--user", USER, row, "--n", "6") == CONTENT[:6] + "\n"  # restored keyring: readable


def test_flipped_chunk_byte_is_exit_4_and_deletes_nothing(cli, attacker):
    row = cli.put()
    attacker.flip_at(attacker.seq_of(row), "chunk", 40, chunk=0)  # the cli's database is the fixture's db_path
    assert_fails(cli.run("read", "--user", USER, row), 4, "IntegrityError")
    assert_fails(cli.run("read", "--user", USER, row, "--mode", "tail", "--n", "1", "--json"), 4, "IntegrityError")
    assert json.loads(cli.ok("stats", "--json"))["rows"] == 1


def test_storage_and_environment_failures_are_exit_5(cli, tmp_path):
    assert_fails(cli.run("stats"), 5, "no database")  # only put creates one
    assert not cli.db.exists()
    cli.put()
    (tmp_path / "elsewhere.log").touch()
    cli.audit.unlink()
    cli.audit.symlink_to(tmp_path / "elsewhere.log")
    assert_fails(cli.run("gc"), 5, "UnsafeStorage")
    cli.audit.unlink()
    cli.audit.touch(mode=0o666)
    cli.audit.chmod(0o666)
    assert_fails(cli.run("gc"), 5, "UnsafeStorage")  # an audit log others may write is refused
    cli.audit.unlink()
    cli.db.chmod(0o666)
    assert_fails(cli.run("gc"), 5, "UnsafeStorage")


def test_audit_log_dash_sends_records_to_stderr(cli):
    cli.env["SCRATCHVAULT_AUDIT_LOG"] = "-"
    row = cli.put()
    result = cli.run("read", "--user", "bob", row)
    lines = result.stderr.decode().splitlines()
    assert result.returncode == 1 and json.loads(lines[0])["denied"] is True and "NotFound" in lines[1]
    assert not cli.audit.exists()


@pytest.mark.parametrize(("raised", "code", "kind"), [(RuntimeError("CANARY in a bug"), 70, "InternalError"),
                                                    (KeyboardInterrupt(), 130, "Interrupted")])
def test_unexpected_errors_are_one_line_without_their_message(monkeypatch, capsys, raised, code, kind):
    def fail(args):
        raise raised

    monkeypatch.setattr(commands, "gc", fail)
    assert cli_module.main(["gc"]) == code
    stderr = capsys.readouterr().err
    assert len(stderr.splitlines()) == 1 and kind in stderr and "CANARY" not in stderr


def test_gc_removes_expired_rows(cli):
    cli.put("short-lived", "--ttl", "0.001")
    kept = cli.put("long-lived")
    assert cli.ok("gc").strip() == "gc removed 1 expired row(s)"
    assert json.loads(cli.ok("stats", "--json"))["rows"] == 1
    assert cli.ok("read", "--user", USER, kept) == "long-lived\n"


def test_keys_rotate_rewrap_retire_shred(cli):
    row = cli.put()
    assert "version 2" in cli.ok("keys", "rotate", "--user", USER)
    assert cli.ok("keys", "rewrap", "--user", USER).strip() == "re-wrapped 1 row(s)"
    assert json.loads(cli.ok("stats", "--json"))["by_key_version"] == {"2": {"rows": 1, "bytes": len(CONTENT)}}
    assert cli.ok("keys", "retire", "--user", USER).strip() == "retired 1 key version(s)"
    assert cli.ok("read", "--user", USER, row, "--n", "6") == CONTENT[:6] + "\n"
    assert "deleted 1 row(s)" in cli.ok("keys", "shred", "--user", USER, "--yes")
    assert not any("/owner-key\0" in name for name in load(cli.keyring))
    assert_fails(cli.run("read", "--user", USER, row), 1, "NotFound")


def test_progress_is_shown_only_when_stderr_is_a_terminal(cli):
    cli.put("x", "--ttl", "0.001")
    piped = cli.run("gc")
    assert piped.returncode == 0 and piped.stderr == b""
    cli.put("y", "--ttl", "0.001")
    leader, follower = pty.openpty()
    try:
        assert cli.run("gc", stderr=follower, stdout=subprocess.PIPE).returncode == 0
        shown = b""
        while select.select([leader], [], [], 0.5)[0]:
            shown += os.read(leader, 4096)
    finally:
        os.close(follower)
        os.close(leader)
    assert b"scratchvault gc: 1 rows" in shown


def test_command_session_leaves_parsed_audit_records_without_canaries(cli):
    row = cli.put()
    cli.run("read", "--user", "bob", row)
    cli.ok("read", "--user", USER, row, "--actor", "CANARY-ACTOR", "--channel", "CANARY-CHANNEL")
    cli.ok("gc")
    cli.ok("keys", "shred", "--user", USER, "--yes")
    assert cli.audit.stat().st_mode & 0o777 == 0o600
    assert not any(canary in cli.audit.read_text() for canary in CANARIES)
    records = cli.records()
    assert [(r["op"], r["outcome"], r.get("denied")) for r in records] == [
        ("put", "ok", None), ("read", "not_found", True), ("read", "ok", None), ("gc", "ok", None),
        ("shred", "ok", None)]
    assert records[0]["user"] == records[2]["user"] == records[4]["user"] != records[1]["user"]
    assert {"actor", "channel"} <= set(records[2]) and records[0]["row"] == records[1]["row"] == row


def test_every_subcommand_is_documented_in_the_readme():
    readme = (ROOT / "README.md").read_text()
    operations = readme[readme.index("## Operations"):]
    actions = {action.dest: action for action in cli_module.build_parser()._subparsers._group_actions}
    names = list(actions["command"].choices)
    names += [f"keys {name}" for name in actions["command"].choices["keys"]._subparsers._group_actions[0].choices]
    missing = [name for name in names if name != "keys" and not re.search(rf"(sv|scratchvault) {name}\b", operations)]
    assert not missing


@pytest.mark.real_keyring
def test_put_and_read_through_the_command_with_the_os_keyring(real_keyring, cli):
    for name in ("PYTHON_KEYRING_BACKEND", "SCRATCHVAULT_TEST_KEYRING"):
        cli.env.pop(name)
    row = cli.put()
    assert cli.ok("read", "--user", USER, row, "--n", "6") == CONTENT[:6] + "\n"
    assert "SecretService" in cli.ok("stats")
    assert_fails(cli.run("read", "--user", "bob", row), 1, "NotFound")
    assert not cli.keyring.exists()


def test_a_database_file_without_a_vault_is_not_turned_into_one(cli):
    cli.db.touch(mode=0o600)  # e.g. left behind by a put whose keyring failed
    assert_fails(cli.run("stats"), 5, "StorageError")
    assert not cli.keyring.exists() or "index" not in cli.keyring.read_text()


def test_an_audit_log_that_is_a_fifo_is_refused_without_hanging(cli, tmp_path):
    fifo = tmp_path / "audit.fifo"
    os.mkfifo(fifo)
    cli.put()
    result = cli.run("stats", "--audit-log", str(fifo))
    assert result.returncode == 5 and "audit log" in result.stderr.decode()
