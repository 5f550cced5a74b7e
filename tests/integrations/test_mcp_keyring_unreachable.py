"""``scratchvault mcp`` launched as a desktop MCP host launches it: the MCP SDK's stdio client passes only HOME,
LOGNAME, PATH, SHELL, TERM and USER, so no session bus reaches the server. It still starts, and answers
``tools/list`` and every ``tools/call`` with an error naming the cause and the remedy, so the host shows it. The
README's headless configuration (its own D-Bus session and an unlocked GNOME Keyring) keeps stdout for the protocol.
"""

from __future__ import annotations

import json
import queue
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client

from keys.testing import MemoryKeyring
from tests.support.repository import ROOT
from vault import Principal, Vault

CANARY = "CANARY-unreachable " * 500


def launched(db: Path) -> StdioServerParameters:
    """The server as the README's desktop configuration starts it, with the SDK's default environment."""
    return StdioServerParameters(command=sys.executable, cwd=str(ROOT),
                                 args=["-m", "vault", "mcp", "--db", str(db), "--user", "alice", "--turn", "t1"])


def test_without_a_session_bus_the_server_starts_and_every_answer_names_the_cause_and_the_remedy(db_path, tmp_path):
    if not isinstance(db_path, Path):
        pytest.skip("the launched server reads a SQLite file")
    with Vault.open(db_path, keyring_backend=MemoryKeyring()) as vault:  # the engine's, on its own keyring
        row = vault.put(Principal("alice"), "t1", 1, "tool", CANARY).id

    async def host() -> None:
        with (tmp_path / "stderr").open("w") as errlog:
            async with Client(stdio_client(launched(db_path), errlog=errlog), read_timeout_seconds=60) as client:
                with pytest.raises(MCPError) as listing:
                    await client.list_tools()
                answer = await client.call_tool("scratchpad_read", {"id": row})
        for message in (str(listing.value), answer.content[0].text):
            assert "KeyUnavailable" in message and "DBUS_SESSION_BUS_ADDRESS" in message, message
            assert "CANARY" not in message
        assert answer.is_error is True

    anyio.run(host)
    stderr = (tmp_path / "stderr").read_text()
    assert "KeyUnavailable" in stderr and "CANARY" not in stderr and "Traceback" not in stderr


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


def headless_configuration() -> dict:
    """The README's MCP configuration for a host on a machine without a desktop session."""
    text = (ROOT / "README.md").read_text()
    blocks = [json.loads(block) for block in re.findall(r"```json\n(.*?)```", text, re.S)]
    [server] = [server for block in blocks for server in block.get("mcpServers", {}).values()
                if server["command"] == "dbus-run-session"]
    return server


@pytest.mark.skipif(not (shutil.which("dbus-run-session") and shutil.which("gnome-keyring-daemon")),
                    reason="needs dbus-run-session and gnome-keyring-daemon (scripts/run installs them)")
def test_the_documented_headless_configuration_keeps_stdout_for_the_protocol(tmp_path):
    server = headless_configuration()
    home = tmp_path / "home"
    (home / ".config" / "scratchvault").mkdir(parents=True)
    (home / ".config" / "scratchvault" / "keyring-password").write_text("trial password")
    script = server["args"][-1]
    assert script.count("exec scratchvault ") == 1
    args = [*server["args"][:-1], script.replace("exec scratchvault ", f"exec {sys.executable} -m vault ")]
    process = subprocess.Popen([server["command"], *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, cwd=ROOT, text=True,
                               env={"HOME": str(home), "PATH": "/usr/bin:/bin", **server.get("env", {})})
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout], daemon=True).start()
    try:
        for message in INITIALIZE, INITIALIZED, LIST:
            process.stdin.write(json.dumps(message) + "\n")
            process.stdin.flush()
            if "id" in message:  # the first line out is this reply: the daemon wrote nothing before it
                assert json.loads(lines.get(timeout=60))["id"] == message["id"]
        process.stdin.close()
        assert process.wait(timeout=60) == 0
    finally:
        process.kill()
    assert lines.empty()  # and nothing after the replies
