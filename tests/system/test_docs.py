"""The README's example, the demo and the examples run as written: against the real OS keyring, and the examples
also with the in-memory keyring (the test command provides the OS keyring; elsewhere those tests skip)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.support.installed import imported_roots, installable_roots, python_blocks
from tests.support.repository import ROOT
from vault import SCRATCHPAD_READ_TOOL, Principal, Vault


def readme_example() -> str:
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "the README has no Python example"
    return blocks[0]


def test_readme_example_is_at_most_30_lines():
    assert len(readme_example().strip().splitlines()) <= 30


@pytest.mark.real_keyring
def test_readme_example_runs_against_the_os_keyring(real_keyring, tmp_path, monkeypatch):
    data_home = tmp_path / "data"
    data_home.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_DATA_HOME", str(data_home))
    exec(compile(readme_example(), "README.md", "exec"), {"__name__": "readme"})
    assert (data_home / "scratchvault" / "scratchpad.db").stat().st_mode & 0o777 == 0o600


@pytest.mark.real_keyring
def test_demo_runs_and_shows_the_refusal_expiry_and_a_clean_disk(real_keyring):
    result = subprocess.run([sys.executable, "-m", "vault", "demo"], cwd=ROOT, capture_output=True, text=True,
                            timeout=120, env=os.environ.copy(), check=False)
    assert result.returncode == 0, result.stderr
    assert "SecretService" in result.stdout
    assert "refused: NotFound" in result.stdout
    assert "unreadable, before any gc" in result.stdout
    assert "gc removed 1 row(s)" in result.stdout
    assert "bob's row in the backup copy: unreadable" in result.stdout
    assert "plaintext canaries found in the database files: none" in result.stdout


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
    assert "keys.keyring.memory.MemoryKeyring" in result.stdout


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


def test_tool_shapes_example_prints_every_vendor_shape():
    result = run_example("examples/tool_shapes.py")
    assert result.returncode == 0, result.stderr
    assert re.findall(r"^== (.+?) \(", result.stdout, re.M) == [
        "openai", "openai strict", "openai-responses", "openai-responses strict", "anthropic", "mcp"]
    blocks = [json.loads(block.split("\n", 1)[1]) for block in result.stdout.split("== ")[1:]]
    flat = ["description", "name", "parameters", "strict", "type"]  # the Responses API's function tool
    assert [sorted(block) for block in blocks] == [["function", "type"], ["function", "type"], flat, flat,
                                                   ["description", "input_schema", "name"],
                                                   ["description", "inputSchema", "name"]]
    assert blocks[0]["function"]["parameters"] == blocks[4]["input_schema"] == blocks[5]["inputSchema"] == (
        SCRATCHPAD_READ_TOOL["parameters"])
    assert blocks[2]["strict"] is False and blocks[2]["parameters"]["properties"] == (
        SCRATCHPAD_READ_TOOL["parameters"]["properties"])
    for strict in (blocks[1]["function"], blocks[3]):  # OpenAI's strict rules: all required, no default
        parameters = strict["parameters"]
        assert strict["strict"] is True and "default" not in json.dumps(strict)
        assert parameters["required"] == list(parameters["properties"]) and not parameters["additionalProperties"]
    assert blocks[1]["function"]["parameters"] == blocks[3]["parameters"]


def test_examples_import_only_what_the_package_and_its_extras_install():
    for example in sorted((ROOT / "examples").glob("*.py")):
        outside = imported_roots(example.read_text()) - installable_roots()
        assert not outside, f"{example.name} imports {sorted(outside)}, which no install of the package provides"


def test_the_readme_says_where_principal_is_introduced_that_actor_and_channel_do_not_restrict_reads(
        vault_dir, keyring_backend):
    text = (ROOT / "README.md").read_text()
    introduced = text.index("Principal(\"alice\", actor=")
    section = text[introduced:text.index("\n## ", introduced)]
    assert "whatever its actor or channel" in " ".join(section.split())
    with Vault.open(vault_dir / "v.db", keyring_backend=keyring_backend) as vault:  # what that sentence says
        row = vault.put(Principal("alice", actor="planner", channel="web"), "turn-1", 1, "tool", "x").id
        assert vault.read(Principal("alice", actor="coder", channel="cli"), row).content == "x"


def test_the_readmes_python_imports_only_what_the_package_and_its_extras_install():
    for block in python_blocks(ROOT / "README.md"):
        outside = imported_roots(block) - installable_roots()
        assert not outside, f"a README example imports {sorted(outside)}, which no extra installs:\n{block[:300]}"
