"""An MCP proxy that brings the vault to any MCP host (needs ``scratchvault[mcp]``): it sits between the host and
an upstream MCP server, lists the upstream's tools plus ``scratchpad_read``, forwards every request, and replaces
each tool result above the pad's threshold with its representation (summary and id), the result itself stored
encrypted for the principal and turn the launch fixed. The model reads it back through ``scratchpad_read``.

What passes through unchanged: small results, error results (``isError``), results with images, audio or
resources in them, resources, resource templates, prompts and completions; the upstream's
errors reach the host with their code and message. A stored result is the upstream's structured content when it
has some (JSON), else its text. Since a result may be replaced, the upstream's output schemas are not declared
again. Requests are forwarded as they come, concurrently; cancelling one cancels the upstream request it waits
for. What the upstream sends on its own reaches the host: a call's progress (against the host's progress token),
log messages (a call's ``_meta``, the host's opt-in to a log level among it, is forwarded; a log message goes to
every call in flight, since stdio does not say which call an upstream's message belongs to, and is dropped when
none is: the protocol lets one ride only a request's stream), list changes of tools, prompts and resources, and
a resource's updates, the host's subscriptions to resources forwarded upstream (``mcp_relay``: in the form each
side's protocol version expects). A host refetching the tools after a change gets ``scratchpad_read`` again.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

from vault.engine import FAULT, STORE_FAILED, tool_declaration
from vault.errors import InvalidArgument, VaultError
from vault.integrations._offload import Pad, TurnSteps, check_pad, pad_call
from vault.integrations.mcp import TOOL_NAME, result, serve_server_stdio
from vault.integrations.mcp_relay import UpstreamNotices
from vault.model import Principal, check_principal

log = logging.getLogger("scratchvault.mcp")
Context = ServerRequestContext[Any, Any]


@dataclass(frozen=True)
class Binding:
    """Whose rows the proxy writes and reads (fixed by its launch, never by the model), and their lifetime
    (None: the pad's)."""

    principal: Principal
    turn_id: str
    ttl_seconds: float | None = None


async def serve_proxy(pad: Pad, command: Sequence[str], binding: Binding) -> None:
    """Start ``command``'s MCP server over stdio (with this process's environment; its stderr goes to ours) and
    serve the proxy in front of it on stdin/stdout until the host closes stdin."""
    upstream = StdioServerParameters(command=command[0], args=list(command[1:]), env=dict(os.environ))
    notices = UpstreamNotices()
    async with Client(stdio_client(upstream, errlog=sys.stderr), logging_callback=notices.log,
                      message_handler=notices.message) as client, anyio.create_task_group() as relays:
        await relays.start(notices.run, client)
        await serve_server_stdio(build_proxy(pad, client, binding, notices), notices.notification_options())
        relays.cancel_scope.cancel()


def build_proxy(pad: Pad, upstream: Client, binding: Binding, notices: UpstreamNotices, *,
                name: str = "scratchvault-proxy") -> Server:
    """A low-level MCP ``Server`` in front of the connected ``upstream`` client (see the module's text); what the
    upstream sends on its own reaches the host through ``notices``, made with the client's callbacks and running."""
    check_pad(pad)
    check_principal(binding.principal)
    if not isinstance(upstream, Client):
        raise InvalidArgument("upstream must be a connected mcp.Client")
    if not isinstance(notices, UpstreamNotices):
        raise InvalidArgument("notices must be the UpstreamNotices the upstream client was made with")
    calls = _Calls(pad, upstream, binding, notices)

    async def list_tools(context: Context, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        listed = await upstream.list_tools(cursor=params.cursor if params else None)
        tools = [tool.model_copy(update={"output_schema": None}) for tool in listed.tools if tool.name != TOOL_NAME]
        if listed.next_cursor is None:
            declared = tool_declaration("mcp")
            tools.append(types.Tool(name=declared["name"], description=declared["description"],
                                    input_schema=declared["inputSchema"]))
        return types.ListToolsResult(tools=tools, next_cursor=listed.next_cursor)

    async def list_resources(context: Context, params: types.PaginatedRequestParams | None) -> Any:
        return await upstream.list_resources(cursor=params.cursor if params else None)

    async def list_templates(context: Context, params: types.PaginatedRequestParams | None) -> Any:
        return await upstream.list_resource_templates(cursor=params.cursor if params else None)

    async def read_resource(context: Context, params: types.ReadResourceRequestParams) -> Any:
        return await upstream.read_resource(str(params.uri))

    async def list_prompts(context: Context, params: types.PaginatedRequestParams | None) -> Any:
        return await upstream.list_prompts(cursor=params.cursor if params else None)

    async def get_prompt(context: Context, params: types.GetPromptRequestParams) -> Any:
        return await upstream.get_prompt(params.name, params.arguments)

    async def complete(context: Context, params: types.CompleteRequestParams) -> Any:
        return await upstream.complete(params.ref, {params.argument.name: params.argument.value},
                                       params.context.arguments if params.context else None)

    server = Server(name, on_list_tools=list_tools, on_call_tool=calls.call, on_list_resources=list_resources,
                    on_list_resource_templates=list_templates, on_read_resource=read_resource,
                    on_subscribe_resource=notices.subscribe, on_unsubscribe_resource=notices.unsubscribe,
                    on_list_prompts=list_prompts, on_get_prompt=get_prompt, on_completion=complete,
                    on_subscriptions_listen=notices.listen)
    server.middleware.append(notices.note_host)
    return server


class _Calls:
    """``tools/call``: scratchpad_read answered from the vault, every other tool forwarded and its large result
    stored."""

    def __init__(self, pad: Pad, upstream: Client, binding: Binding, notices: UpstreamNotices) -> None:
        self.pad, self.upstream, self.binding, self.steps = pad, upstream, binding, TurnSteps()
        self.notices = notices

    async def call(self, context: Context, params: types.CallToolRequestParams) -> types.CallToolResult:
        who = self.binding
        if params.name == TOOL_NAME:
            try:
                answer = await pad_call(self.pad, "call_tool", who.principal, who.turn_id, params.arguments)
            except Exception as error:  # call_tool answers every vault fault itself; a bug: no details out
                log.error("scratchpad_read: unexpected %s", type(error).__name__)
                answer = dict(FAULT)
            return result(answer)
        with self.notices.during(context.session):  # the host's _meta (its log level); the upstream's client puts
            # a progress token of its own in it, whose progress is reported against the host's
            forwarded = await self.upstream.call_tool(params.name, params.arguments, meta=context.meta,
                                                      progress_callback=context.session.report_progress)
        kept = _storable(forwarded)
        if kept is None:
            return forwarded
        step = self.steps.next(who.principal, who.turn_id)
        try:
            seen = await pad_call(self.pad, "observe", who.principal, who.turn_id, step, _tool_name(params.name),
                                  kept, ttl_seconds=who.ttl_seconds)
        except VaultError as error:
            log.warning("a tool result was not offloaded: %s", type(error).__name__)
            return result(dict(STORE_FAILED))
        if seen is kept:  # small: shown as the upstream sent it
            return forwarded
        return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(seen, ensure_ascii=False))],
                                    structured_content=seen)


def _storable(forwarded: types.CallToolResult) -> Any:
    """What of a result may be stored: its text, or its structured content when the text is that content's JSON
    (JSON is stored as json); None when it must pass as it is (an error result, or one holding more than text)."""
    parts = forwarded.content
    if forwarded.is_error or not parts or not all(isinstance(part, types.TextContent) for part in parts):
        return None
    text = "\n".join(part.text for part in parts if isinstance(part, types.TextContent))
    structured = forwarded.structured_content
    return structured if structured is not None and _is_json_of(text, structured) else text


def _is_json_of(text: str, value: dict[str, Any]) -> bool:
    try:
        return bool(json.loads(text) == value)
    except (ValueError, RecursionError):
        return False


def _tool_name(name: str) -> str:
    """The upstream tool's name as the row's executor name (names are short identifiers; an odd one is cut)."""
    return name[:200] or "tool"
