"""An upstream MCP server that speaks only the protocol versions of the ``initialize`` handshake (before
2026-07-28), for ``scratchvault mcp --wrap``: a low-level ``Server`` of the SDK served by its handshake-only loop.
It notifies its clients as those versions do, with bare notifications on the connection: its tools announce that
its lists changed, add a tool (and announce it), and announce a resource's update to a client subscribed to it
(``resources/subscribe``); ``subscribed`` says which resources are. Run as
``python -m tests.integrations.mcp_upstream_handshake`` (stdio)."""

from __future__ import annotations

import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server

Context = ServerRequestContext[Any, Any]
README = "page://readme"
subscribed: set[str] = set()
tools = ["announce", "grow", "touch", "subscribed"]


def text(value: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=value)])


async def list_tools(context: Context, params: Any) -> types.ListToolsResult:
    schema = {"type": "object", "properties": {"uri": {"type": "string"}}}
    return types.ListToolsResult(tools=[types.Tool(name=name, input_schema=schema) for name in tools])


async def call_tool(context: Context, params: types.CallToolRequestParams) -> types.CallToolResult:
    session = context.session
    if params.name == "announce":
        await session.send_tool_list_changed()
        await session.send_prompt_list_changed()
        await session.send_resource_list_changed()
        return text("announced")
    if params.name == "grow":
        tools.append("grown")
        await session.send_tool_list_changed()
        return text("grew")
    if params.name == "touch":
        uri = (params.arguments or {}).get("uri", "")
        if uri in subscribed:
            await session.send_resource_updated(uri)
        return text("touched")
    if params.name == "subscribed":
        return text(" ".join(sorted(subscribed)))
    return types.CallToolResult(content=[types.TextContent(type="text", text="no such tool")], is_error=True)


async def subscribe(context: Context, params: types.SubscribeRequestParams) -> types.EmptyResult:
    subscribed.add(str(params.uri))
    return types.EmptyResult()


async def unsubscribe(context: Context, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    subscribed.discard(str(params.uri))
    return types.EmptyResult()


async def list_resources(context: Context, params: Any) -> types.ListResourcesResult:
    return types.ListResourcesResult(resources=[types.Resource(uri=README, name="readme")])


server = Server("upstream-handshake", on_list_tools=list_tools, on_call_tool=call_tool,
                on_list_resources=list_resources, on_subscribe_resource=subscribe,
                on_unsubscribe_resource=unsubscribe)


async def main() -> None:
    changes = NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True)
    async with stdio_server() as (read_stream, write_stream), server.lifespan(server) as state:
        await serve_loop(server, read_stream, write_stream, lifespan_state=state,
                         init_options=server.create_initialization_options(changes))


if __name__ == "__main__":
    print("upstream: started", file=sys.stderr, flush=True)
    anyio.run(main)
