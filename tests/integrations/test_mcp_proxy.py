"""``scratchvault mcp --wrap -- <upstream>``, run as a host runs it: the MCP SDK's client in front, a real upstream
MCP server of the tests behind (tests/integrations/mcp_upstream.py). Its tools are listed with scratchpad_read; a
2 MB page comes back as a summary and an id, stored encrypted for the launch's user, and read back through
scratchpad_read (slices and find); small, error and image results, resources and prompts pass unchanged; the
upstream's stderr reaches the host's. Keys sit in a file keyring both processes share (test-only)."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.integrations.mcp_upstream import PAGE
from tests.integrations.mcp_upstream import server as upstream_server
from tests.support.file_keyring import FileKeyring, load
from tests.support.repository import ROOT, child_env
from vault import Principal, Vault
from vault.engine import NOT_FOUND, OFFLOADED_KEYS

UPSTREAM = [sys.executable, "-m", "tests.integrations.mcp_upstream"]


def proxy(db: Path, keyring: Path, *flags: str, upstream: Sequence[str] = UPSTREAM) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, cwd=str(ROOT), args=[
        "-m", "vault", "mcp", "--db", str(db), "--user", "alice", *flags, "--wrap", "--", *upstream],
        env=child_env(PYTHON_KEYRING_BACKEND="tests.support.file_keyring.FileKeyring",
                      SCRATCHVAULT_TEST_KEYRING=str(keyring)))


async def outcome(client: Client, tool: str) -> tuple:
    """What calling ``tool`` gives: the result's error flag and text, or the protocol error's code and message."""
    try:
        answer = await client.call_tool(tool, {})
    except MCPError as error:
        return "error", error.code, error.message
    return "result", answer.is_error, answer.content[0].text


@pytest.fixture
def where(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "proxy.db", tmp_path / "keyring.json"


def host(params: StdioServerParameters, errlog: Path, scenario) -> None:
    async def main() -> None:
        with errlog.open("w") as stderr:
            async with Client(stdio_client(params, errlog=stderr), read_timeout_seconds=120) as client:
                await scenario(client)

    anyio.run(main)


def test_a_large_result_is_stored_and_read_back_small_ones_pass(where, tmp_path):
    db, keyring = where
    seen: dict = {}

    async def scenario(client: Client) -> None:
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert names == ["fetch_page", "small", "listing", "broken", "picture", "working", "slow", "announce",
                         "grow", "touch", "listening", "scratchpad_read"]
        page = await client.call_tool("fetch_page", {})
        seen["page"] = representation = page.structured_content
        assert set(representation) == OFFLOADED_KEYS and representation["executor_name"] == "fetch_page"
        assert "CANARY" not in page.content[0].text or len(page.content[0].text) < 4096
        head = await client.call_tool("scratchpad_read", {"id": representation["id"], "n": 30})
        assert head.structured_content["content"] == PAGE[:30]
        found = await client.call_tool("scratchpad_read", {"id": representation["id"], "mode": "find",
                                                           "query": "0063999 canary", "ignore_case": True})
        [match] = found.structured_content["matches"]
        assert PAGE[match["offset"]:].startswith("0063999 CANARY")
        assert (await client.call_tool("small", {})).content[0].text == "tiny answer"
        listing = (await client.call_tool("listing", {})).structured_content
        assert set(listing) == OFFLOADED_KEYS and listing["content_kind"] == "json"
        broken = await client.call_tool("broken", {})
        assert broken.is_error and broken.content[0].text.startswith("Error executing tool broken")  # as it came
        assert (await client.call_tool("picture", {})).content[0].type == "image"
        assert (await client.read_resource("page://readme")).contents[0].text == "the upstream's readme"
        prompt = await client.get_prompt("summarise", {"topic": "logs"})
        assert "Summarise logs." in str(prompt.messages[0].content)
        assert await outcome(client, "no_such_tool") == seen["direct"]  # the upstream's own answer, as it came

    async def direct() -> None:
        async with Client(upstream_server) as client:
            seen["direct"] = await outcome(client, "no_such_tool")

    anyio.run(direct)
    host(proxy(db, keyring, "--turn", "turn-9"), tmp_path / "stderr", scenario)
    assert "upstream: started" in (tmp_path / "stderr").read_text()  # the upstream's stderr, forwarded
    assert "CANARY" not in db.read_bytes().decode("latin-1") and load(keyring)  # stored encrypted
    with Vault.open(db, keyring_backend=FileKeyring(keyring)) as vault:  # the engine's view: alice's, turn-9
        assert vault.get(Principal("alice"), seen["page"]["id"], turn_id="turn-9").content == PAGE


def test_each_proxy_session_is_a_turn_of_its_own_and_another_user_reads_nothing(where, tmp_path):
    db, keyring = where
    ids: list[str] = []

    async def first(client: Client) -> None:
        ids.append((await client.call_tool("fetch_page", {})).structured_content["id"])

    async def second(client: Client) -> None:
        assert (await client.call_tool("scratchpad_read", {"id": ids[0]})).structured_content == NOT_FOUND

    host(proxy(db, keyring), tmp_path / "one", first)
    host(proxy(db, keyring), tmp_path / "two", second)  # a new session: a new turn, the first's row not in it


def test_the_readme_configuration_runs_with_the_tests_upstream(where, tmp_path):
    """The README's host configuration as written, but for the upstream's command (and the test keyring)."""
    text = (ROOT / "README.md").read_text()
    [entry] = [server for block in re.findall(r"```json\n(.*?)```", text, re.S)
               for server in json.loads(block).get("mcpServers", {}).values() if "--wrap" in server["args"]]
    args = entry["args"]
    assert entry["command"] == "scratchvault" and args[:2] == ["mcp", "--user"] and "--" in args
    db, keyring = where
    mine = [*args[:args.index("--") + 1], *UPSTREAM]
    keys = {"PYTHON_KEYRING_BACKEND": "tests.support.file_keyring.FileKeyring",
            "SCRATCHVAULT_TEST_KEYRING": str(keyring)}
    params = StdioServerParameters(command=sys.executable, cwd=str(ROOT), env=child_env(**entry["env"], **keys),
                                   args=["-m", "vault", "mcp", "--db", str(db), *mine[1:]])

    async def scenario(client: Client) -> None:
        assert "scratchpad_read" in [tool.name for tool in (await client.list_tools()).tools]
        assert set((await client.call_tool("fetch_page", {})).structured_content) == OFFLOADED_KEYS

    host(params, tmp_path / "stderr", scenario)
