"""Engine integration across processes: a turn suspended here is resumed by another process, and the examples
run as a user would run them (in-memory keyring always; the OS keyring when the test command provides one).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from tests.support.file_keyring import FileKeyring
from tests.support.repository import ROOT, calling, child_env
from vault import SCRATCHPAD_READ_TOOL, Principal, Vault
from vault.engine import NOT_FOUND, Scratchpad

RESUME = calling("tests.test_engine_process.resume_main")
PAGE = "".join(f"row {i:05} of a large tool output\n" for i in range(3000))


def resume_main() -> None:
    """argv: db keyring-file context; resumes alice's turn "t-resume" 50 minutes after it was written, where
    ``context`` is what the suspended engine kept of step 1 (the representation dict); prints a JSON report."""
    db, keyring_file, context = sys.argv[1:]
    context = json.loads(context)
    row_id = context["id"]
    now = [time.time() + 50 * 60]
    with Vault.open(db, keyring_backend=FileKeyring(keyring_file), clock=lambda: now[0]) as vault:
        pad, alice, bob = Scratchpad(vault), Principal("alice"), Principal("bob")
        report = {"tools": pad.tools(alice, "t-resume"), "bob_tools": pad.tools(bob, "t-resume"),
                  "listed": [rep.id for rep in vault.list_for_turn(alice, "t-resume")],
                  "extended": vault.extend_turn(alice, "t-resume", 3600)}
        now[0] += 20 * 60  # past the hour the rows were written with
        report |= {"tools_later": pad.tools(alice, "t-resume"), "other_turn_later": pad.tools(alice, "t-other"),
                   "read": pad.call_tool(alice, "t-resume", {"id": row_id, "mode": "tail", "n": 30}),
                   "bob_read": pad.call_tool(bob, "t-resume", {"id": row_id}),
                   "full": pad.full_value(alice, "t-resume", context) == PAGE,
                   "stats": pad.stats()}
    print(json.dumps(report))


@pytest.mark.slow
def test_turn_suspended_here_is_resumed_in_a_new_process(tmp_path, db_path):
    keyring_file = tmp_path / "keyring.json"
    with Vault.open(db_path, keyring_backend=FileKeyring(keyring_file)) as vault:
        pad = Scratchpad(vault)
        seen = pad.observe(Principal("alice"), "t-resume", 1, "web.fetch", PAGE, ttl_seconds=3600)
        pad.observe(Principal("alice"), "t-other", 1, "web.fetch", PAGE, ttl_seconds=3600)
    child = subprocess.run([sys.executable, "-c", RESUME, str(db_path), str(keyring_file), json.dumps(seen)],
                           capture_output=True, text=True, timeout=120, check=False, env=child_env())
    assert child.returncode == 0, child.stderr
    report = json.loads(child.stdout)
    assert report["tools"] == [SCRATCHPAD_READ_TOOL] and report["bob_tools"] == []
    assert report["listed"] == [seen["id"]] and report["extended"] == 1
    assert report["tools_later"] == [SCRATCHPAD_READ_TOOL]  # kept alive by extend_turn ...
    assert report["other_turn_later"] == []  # ... while the turn that was not extended has expired
    assert report["read"]["content"] == PAGE[-30:] and report["read"]["full_size"] == len(PAGE)
    assert report["bob_read"] == NOT_FOUND
    assert report["full"] is True
    assert report["stats"]["tool_reads"] == 1 and report["stats"]["denied_reads"] == 1


def run_example(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env=env or os.environ.copy(), check=False)


def assert_story(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert '[bob] model sees: {"error": "not found' in out
    assert "bob's model used alice's id and got not found" in out
    assert '[alice] model sees: {"id":' in out and '"content_kind": "text"' in out  # a representation
    assert "[bob] model sees: {\"sum\": 42}" in out  # an inline observation
    assert '[bob] model sees: {"count": 400}' in out  # ${step2.results} resolved to the full list
    assert "extend_turn(ttl_seconds=3600) extended 1 row(s)" in out
    assert "[bob] (not resumed) tools offered: []" in out
    resumed = out.split("20 minutes later")[1]
    assert "[alice] tools offered: ['scratchpad_read']" in resumed  # the tool came back ...
    assert '[alice] model sees: {"id": "' in resumed and '"content": "' in resumed  # ... and reads
    assert "gc removed 1 expired row(s)" in out and "clean-up: shred_owner removed 1 row(s)" in out


def test_agent_loop_example_runs_with_the_memory_keyring():
    result = run_example("examples/agent_loop.py", "--memory-keyring")
    assert_story(result)
    assert "keys.testing.MemoryKeyring" in result.stdout


def test_agent_loop_example_without_a_usable_keyring_says_what_to_do():
    env = os.environ | {"PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"}
    result = run_example("examples/agent_loop.py", env=env)
    assert result.returncode == 2
    assert "--memory-keyring" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.real_keyring
def test_agent_loop_example_runs_against_the_os_keyring(real_keyring):
    result = run_example("examples/agent_loop.py")
    assert_story(result)
    assert "SecretService" in result.stdout


def test_tool_shapes_example_prints_the_three_vendor_shapes():
    result = run_example("examples/tool_shapes.py")
    assert result.returncode == 0, result.stderr
    blocks = [json.loads(block.split("\n", 1)[1]) for block in result.stdout.split("== ")[1:]]
    assert [sorted(block) for block in blocks] == [
        ["function", "type"], ["description", "input_schema", "name"], ["description", "inputSchema", "name"]]
    assert blocks[0]["function"]["parameters"] == blocks[1]["input_schema"] == blocks[2]["inputSchema"] == (
        SCRATCHPAD_READ_TOOL["parameters"])
