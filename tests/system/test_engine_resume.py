"""Engine integration across processes: a turn suspended here is resumed by another process (the examples, which
do the same in one process, are tests/system/test_docs.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from tests.support.file_keyring import FileKeyring
from tests.support.repository import calling, child_env
from vault import SCRATCHPAD_READ_TOOL, Principal, Vault
from vault.engine import NOT_FOUND, Scratchpad

RESUME = calling("tests.system.test_engine_resume.resume_main")
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


