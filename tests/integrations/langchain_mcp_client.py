"""LangChain's MCP client in front of ``scratchvault mcp --wrap``: run by the virtualenv of
tests/integrations/langchain_mcp_client.txt (langchain-mcp-adapters pins the MCP SDK 1.x), never imported by the
suite, so it imports nothing of the project.

Reads the proxy's launch (``{"command", "args", "env", "cwd"}``) as JSON on stdin, loads the proxy's tools with
``MultiServerMCPClient`` and ``load_mcp_tools`` over one session (the proxy's turn lasts a session), and calls them as
an agent's tool node does, with tool calls that come back as ``ToolMessage``s. Prints one JSON object: the tool
names, and the text each call gave: the large page, a find in it by the id the page's answer named (null without
one), a small result.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.sessions import StdioConnection
from langchain_mcp_adapters.tools import load_mcp_tools

FIND = {"mode": "find", "query": "0012345 canary", "ignore_case": True}


async def text_of_call(tools: dict[str, BaseTool], name: str, args: dict[str, Any]) -> str:
    """The one text block of the ``ToolMessage`` a tool call of ``name`` gives, as a model would be shown it."""
    message = await tools[name].ainvoke({"type": "tool_call", "id": f"call-{name}", "name": name, "args": args})
    assert isinstance(message, ToolMessage), type(message)
    content = message.content
    if isinstance(content, str):
        return content
    [block] = content
    assert isinstance(block, dict) and block["type"] == "text", block
    return str(block["text"])


def stored_id(page: str) -> str | None:
    """The id a stored result's answer names; None when the page came back as it is (the suite's test says so)."""
    try:
        answer = json.loads(page)
    except ValueError:
        return None
    return answer.get("id") if isinstance(answer, dict) else None


async def drive(launch: dict[str, Any]) -> dict[str, Any]:
    proxy: StdioConnection = {"transport": "stdio", "command": launch["command"], "args": launch["args"],
                              "env": launch["env"], "cwd": launch["cwd"]}
    client = MultiServerMCPClient({"proxy": proxy})
    async with client.session("proxy") as session:
        tools = {tool.name: tool for tool in await load_mcp_tools(session)}
        page = await text_of_call(tools, "fetch_page", {})
        stored = stored_id(page)
        found = None if stored is None else await text_of_call(tools, "scratchpad_read", {"id": stored, **FIND})
        small = await text_of_call(tools, "small", {})
    return {"tools": sorted(tools), "page": page, "found": found, "small": small}


def main() -> None:
    launch = json.load(sys.stdin)
    print(json.dumps(asyncio.run(drive(launch))))


if __name__ == "__main__":
    main()
