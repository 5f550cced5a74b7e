"""An MCP server offering ``scratchpad_read`` (needs ``scratchvault[mcp]``): over stdio for one principal and
turn fixed by the host that launches it (``scratchvault mcp``), or over any MCP transport with a hook that
names the principal and turn of each request (a multi-tenant HTTP server maps its access tokens to them).

The model's arguments never choose whose rows are read: ``principal_for`` does, from the request's context.
``tools/list`` follows :meth:`Scratchpad.tools` at every request (the tool is listed only while the principal
has readable rows in the turn; a vault fault lists nothing); no ``listChanged`` is advertised, since the rows are
written by the engine, elsewhere, and this server has no event to announce. ``tools/call`` answers
:meth:`Scratchpad.call_tool`'s dict as JSON text and as structured content, ``isError`` when it is an error;
arguments of any kind reach ``call_tool`` (not only objects: an array or a string gets its answer too).
Vault calls run in worker threads, so the event loop never blocks on the keyring or the database.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import replace
from importlib import metadata
from typing import Any

import mcp_types as types
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from vault.engine import FAULT
from vault.errors import InvalidArgument
from vault.inputs import check_identifier
from vault.integrations._offload import Pad, check_pad, pad_call
from vault.model import Principal, check_principal

log = logging.getLogger("scratchvault.mcp")
_RAW_ARGUMENTS: ContextVar[Any] = ContextVar("scratchvault_mcp_raw_arguments", default=None)
TOOL_NAME = "scratchpad_read"
REFUSED = "this request has no principal here"  # the only thing a refused request learns

Who = tuple[Principal, str]
PrincipalFor = Callable[[ServerRequestContext[Any, Any]], Who | Awaitable[Who]]


def fixed_principal(principal: Principal, turn_id: str) -> PrincipalFor:
    """The hook of a server bound to one principal and turn for its whole life (the stdio server)."""
    check_principal(principal)
    check_identifier(turn_id, "turn_id")
    return lambda _context: (principal, turn_id)


def access_token(context: ServerRequestContext[Any, Any]) -> AccessToken | None:
    """The bearer token the SDK's auth middleware verified for this HTTP request (``token_verifier`` of
    ``streamable_http_app``), or None (stdio, or no authentication configured): what a hook maps to a principal."""
    scope = getattr(getattr(context, "request", None), "scope", None)
    user = scope.get("user") if isinstance(scope, dict) else None
    return user.access_token if isinstance(user, AuthenticatedUser) else None


def build_server(scratchpad: Pad, principal_for: PrincipalFor, *, name: str = "scratchvault") -> Server:
    """A low-level MCP ``Server`` offering ``scratchpad_read``. ``principal_for(context)`` (sync or async) names
    the principal and turn of each request from what the host authenticated (``context.request`` on HTTP);
    when it raises or returns anything else, the request is refused with one message naming no one."""
    check_pad(scratchpad, "scratchpad")
    if not callable(principal_for):
        raise InvalidArgument("principal_for must be a callable taking the request context")
    if not isinstance(name, str) or not name:
        raise InvalidArgument("name must be a non-empty str")

    async def list_tools(context: ServerRequestContext[Any, Any], _params: Any) -> types.ListToolsResult:
        principal, turn_id = await _who(principal_for, context)
        try:
            offered = await pad_call(scratchpad, "tools", principal, turn_id, "mcp")
        except Exception as error:  # a vault fault (or a bug) lists nothing, like a turn without rows
            log.warning("tools/list: %s; scratchpad_read not offered", type(error).__name__)
            offered = []
        return types.ListToolsResult(tools=[types.Tool(name=declared["name"], description=declared["description"],
                                                       input_schema=declared["inputSchema"]) for declared in offered])

    async def call_tool(context: ServerRequestContext[Any, Any],
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name != TOOL_NAME:
            raise MCPError(types.INVALID_PARAMS, f"unknown tool; this server offers only {TOOL_NAME}")
        principal, turn_id = await _who(principal_for, context)
        try:
            arguments = _RAW_ARGUMENTS.get() if params.arguments is None else params.arguments
            answer = await pad_call(scratchpad, "call_tool", principal, turn_id, arguments)
        except Exception as error:  # call_tool answers every vault fault itself; this is a bug: no details out
            log.error("scratchpad_read: unexpected %s", type(error).__name__)
            answer = dict(FAULT)
        return result(answer)

    server = Server(name, version=_version(), on_list_tools=list_tools, on_call_tool=call_tool)
    server.middleware.append(_pass_raw_arguments)  # inside the SDK's own (tracing) middleware
    return server


def result(answer: dict[str, Any]) -> types.CallToolResult:
    """``call_tool``'s dict as the MCP result: JSON text for every client, the same object as structured
    content, and ``isError`` for the error answers (not found, invalid arguments, fault)."""
    if not isinstance(answer, dict):
        raise InvalidArgument("answer must be the dict Scratchpad.call_tool returned")
    text = json.dumps(answer, ensure_ascii=False)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=answer,
                                is_error="error" in answer)


def unavailable_server(cause: str, *, name: str = "scratchvault") -> Server:
    """A server for a vault that could not be opened (no keyring reachable, no database): it starts all the same,
    so the host can show why, and answers ``tools/list`` with an error and every ``tools/call`` with an error
    result, both saying ``cause`` (the error's kind, message and remedy, which name no content and no key)."""
    if not isinstance(cause, str) or not cause:
        raise InvalidArgument("cause must be a non-empty str")

    async def list_tools(context: ServerRequestContext[Any, Any], _params: Any) -> types.ListToolsResult:
        raise MCPError(types.INTERNAL_ERROR, cause)

    async def call_tool(context: ServerRequestContext[Any, Any],
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text=cause)], is_error=True)

    return Server(name, version=_version(), on_list_tools=list_tools, on_call_tool=call_tool)


async def serve_stdio(scratchpad: Pad, principal: Principal, turn_id: str) -> None:
    """Serve MCP on stdin/stdout for one principal and turn until the client closes stdin (stdout carries
    only the protocol: the SDK points file descriptor 1 at stderr while it serves)."""
    await serve_server_stdio(build_server(scratchpad, fixed_principal(principal, turn_id)))


async def serve_server_stdio(server: Server, changes: NotificationOptions | None = None) -> None:
    """Serve ``server`` on stdin/stdout until the client closes stdin; ``changes``: the list changes it tells a
    client of an earlier protocol version it notifies (none unless given)."""
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options(changes))


async def _pass_raw_arguments(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """``tools/call`` arguments that are not an object (an array, a string, a number) would get the SDK's own
    "invalid params" before the tool runs; they go to ``call_tool`` instead, which answers them like any other
    arguments. The SDK validates the params after its middleware: this one takes them out and hands them on."""
    params = ctx.params
    arguments = params.get("arguments") if ctx.method == "tools/call" and isinstance(params, Mapping) else None
    if arguments is None or isinstance(arguments, Mapping) or not isinstance(params, Mapping):
        return await call_next(ctx)
    token = _RAW_ARGUMENTS.set(arguments)
    try:
        return await call_next(replace(ctx, params={k: v for k, v in params.items() if k != "arguments"}))
    finally:
        _RAW_ARGUMENTS.reset(token)


def _version() -> str:
    try:
        return metadata.version("scratchvault")
    except metadata.PackageNotFoundError:  # run from a source tree
        return ""


async def _who(principal_for: PrincipalFor, context: ServerRequestContext[Any, Any]) -> Who:
    """The request's principal and turn from the host's hook, checked; MCPError (naming no one) otherwise."""
    try:
        who = principal_for(context)
        if inspect.isawaitable(who):
            who = await who
        principal, turn_id = who
        check_principal(principal)
        check_identifier(turn_id, "turn_id")
    except Exception as error:  # the host's refusal or its bug: neither its message nor the token goes out
        log.warning("request refused: principal_for raised or returned no principal (%s)", type(error).__name__)
        raise MCPError(types.INVALID_REQUEST, REFUSED) from None
    return principal, turn_id
