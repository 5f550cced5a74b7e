"""``scratchvault mcp --wrap`` from LangChain's own MCP client, langchain-mcp-adapters: it requires the MCP SDK 1.x
and this venv has 2.x, so it runs in a virtualenv of its own (pinned in tests/integrations/langchain_mcp_client.txt,
made by scripts/langchain_mcp.sh) as tests/integrations/langchain_mcp_client.py, which launches the proxy from this
venv in front of the tests' upstream (tests/integrations/mcp_upstream.py) and prints what each tool call gave.

Under the test command (SCRATCHVAULT_LANGCHAIN_MCP_REQUIRED=1) a missing client venv fails the test; by hand it skips,
saying how to make it."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.integrations.test_mcp_proxy import proxy
from tests.integrations.test_mcp_proxy_frameworks import summarised_and_found
from tests.support.components import Component
from tests.support.repository import ROOT

PINS = ROOT / "tests" / "integrations" / "langchain_mcp_client.txt"
CLIENT = ROOT / "tests" / "integrations" / "langchain_mcp_client.py"
STAMP = ".scratchvault-complete"  # written by scripts/langchain_mcp.sh once the install succeeded
WAIT = 240  # seconds for the whole client run: three processes start on a loaded machine

CLIENT_VENV = Component("LangChain's MCP client venv", "SCRATCHVAULT_LANGCHAIN_MCP_REQUIRED",
                        "make it with: bash scripts/langchain_mcp.sh (cached in ~/.cache/scratchvault)")

pytestmark = pytest.mark.slow


def cached_python() -> Path:
    """The client venv's python where scripts/langchain_mcp.sh puts it for this pin list."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "scratchvault" / f"langchain-mcp-{hashlib.sha256(PINS.read_bytes()).hexdigest()[:16]}" / "bin/python"


@pytest.fixture(scope="session")
def client_python() -> Path:
    """The python of the client venv: the one the test command made, else the cached one; fail or skip without."""
    python = Path(os.environ.get("SCRATCHVAULT_LANGCHAIN_MCP_PYTHON") or cached_python())
    if not (python.parent.parent / STAMP).is_file():
        CLIENT_VENV.unusable(f"no finished venv at {python.parent.parent}")
    return python


def test_langchain_gets_a_summary_finds_a_line_and_a_small_result_passes_through_the_proxy(client_python, tmp_path):
    params = proxy(tmp_path / "proxy.db", tmp_path / "keyring.json")
    launch = {"command": params.command, "args": list(params.args), "env": params.env, "cwd": params.cwd}
    run = subprocess.run([str(client_python), str(CLIENT)], input=json.dumps(launch), capture_output=True,
                         text=True, timeout=WAIT, check=False)
    assert run.returncode == 0, run.stderr[-4000:]
    shown = json.loads(run.stdout)
    assert "scratchpad_read" in shown["tools"] and "fetch_page" in shown["tools"]
    assert shown["found"] is not None, f"the page reached LangChain as it is: {len(shown['page'])} characters"
    summarised_and_found(json.loads(shown["page"]), json.loads(shown["found"]))
    assert shown["small"] == "tiny answer"
