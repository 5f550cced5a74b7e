"""``scratchvault mcp --wrap`` from a framework's own MCP client: the OpenAI Agents SDK's ``MCPServerStdio`` and
pydantic-ai's ``MCPToolset`` (on fastmcp's stdio transport) launch the proxy in front of the tests' upstream
(tests/integrations/mcp_upstream.py); a scripted model fetches the 2 MB page, sees its summary and id, and finds a
line in it through ``scratchpad_read``. LangChain's MCP client needs the MCP SDK 1.x: test_mcp_proxy_langchain.py."""

from __future__ import annotations

import asyncio
import json

from agents import Agent, Runner
from agents.mcp import MCPServerStdio
from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.models.function import FunctionModel

from tests.integrations.mcp_upstream import PAGE
from tests.integrations.test_mcp_proxy import proxy
from tests.integrations.test_openai_agents import ScriptedModel
from tests.integrations.test_pydantic_ai import Script

WAIT = 60  # seconds: two processes start on a loaded machine
FIND = {"mode": "find", "query": "0012345 canary", "ignore_case": True}


def shown(output: list) -> dict:
    """A tool's output as the Agents SDK hands it to the model: the MCP result's one text part, here JSON."""
    [part] = output
    return json.loads(part["text"])


def test_the_agents_sdk_gets_a_summary_and_finds_a_line_of_the_page_through_the_proxy(tmp_path):
    params = proxy(tmp_path / "proxy.db", tmp_path / "keyring.json")
    server = MCPServerStdio({"command": params.command, "args": params.args, "env": params.env, "cwd": params.cwd},
                            client_session_timeout_seconds=WAIT)
    model = ScriptedModel([("fetch_page", {}), ("scratchpad_read", lambda outputs: {
        "id": shown(outputs[0])["id"], **FIND}), "done"])

    async def main() -> None:
        async with server:
            assert (await Runner.run(Agent(name="a", model=model, mcp_servers=[server]), "go")).final_output == "done"

    asyncio.run(main())
    assert "scratchpad_read" in [tool.name for tool in model.offered[0]]
    summarised_and_found(shown(model.outputs[0]), shown(model.outputs[1]))


def test_pydantic_ai_gets_a_summary_and_finds_a_line_of_the_page_through_the_proxy(tmp_path):
    params = proxy(tmp_path / "proxy.db", tmp_path / "keyring.json")
    toolset = MCPToolset(StdioTransport(params.command, list(params.args), env=params.env, cwd=params.cwd),
                         init_timeout=WAIT, read_timeout=WAIT)
    script = Script(("fetch_page", {}), ("scratchpad_read", lambda s: {"id": s.stored_id(), **FIND}))
    assert PydanticAgent(FunctionModel(script), toolsets=[toolset]).run_sync("go").output == "done"
    assert "scratchpad_read" in script.offered[0]
    summarised_and_found(script.seen(0), script.seen(1))


def summarised_and_found(page: dict, found: dict) -> None:
    """The page reached the model as its summary and id, and the find its one matching line."""
    assert page["size_bytes"] == len(PAGE) and len(json.dumps(page)) < 4096
    [match] = found["matches"]
    assert PAGE[match["offset"]:].startswith("0012345 CANARY-upstream") and found["more"] is False
