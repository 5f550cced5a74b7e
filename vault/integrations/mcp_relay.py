"""What an upstream MCP server sends on its own, relayed by the proxy to its host in the form the host's protocol
version expects (needs ``scratchvault[mcp]``).

Change events (tools, prompts and resources list changes, and a resource's updates) come from an upstream of
protocol 2026-07-28 on ``subscriptions/listen`` streams the relay opens, and from an upstream of an earlier version
as bare notifications (the upstream client's message handler). They go to a host of 2026-07-28 through its own
``subscriptions/listen`` streams (the SDK's ``ListenHandler`` on ``bus``, which keeps to each stream's filter), and
to a host of an earlier version as bare notifications on its connection, a resource's updates only while it is
subscribed to that resource. A host's interest in a resource (``resources/subscribe``, or a listen stream naming
it) is forwarded: ``resources/subscribe`` to an upstream of an earlier version (its refusal reaches the host), a
listen stream for that resource to a 2026-07-28 one; the upstream is told once the last interest ends. Log
messages go to the host's calls in flight (see ``during``).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import anyio
import mcp_types as types
from anyio.abc import TaskGroup, TaskStatus
from mcp import Client, MCPError
from mcp.client.session import IncomingMessage
from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import NotificationOptions
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.subscriptions import (
    SUBSCRIPTION_ID_META_KEY,
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    ToolsListChanged,
    event_from_wire,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

log = logging.getLogger("scratchvault.mcp")
Context = ServerRequestContext[Any, Any]


class UpstreamNotices:
    """The relay of one proxy: made before the upstream ``Client`` (whose ``logging_callback`` is ``log`` and
    ``message_handler`` is ``message``), then run for that client's life with ``run``. The proxy's server takes
    ``note_host`` as middleware, ``listen`` for ``subscriptions/listen``, ``subscribe`` and ``unsubscribe``."""

    def __init__(self) -> None:
        self.bus = InMemorySubscriptionBus()
        self._listen = ListenHandler(self.bus)
        self._calls: list[ServerSession] = []
        self._handshake_host: ServerSession | None = None  # set once a host of an earlier version asks anything
        self._upstream: Client | None = None
        self._streams: TaskGroup | None = None
        self._interest: dict[str, int] = {}  # resource URI -> how many of the host's interests hold it
        self._followed: dict[str, anyio.CancelScope] = {}  # URI -> the upstream listen stream following it
        self._follow_lock = anyio.Lock()

    @contextmanager
    def during(self, call: ServerSession) -> Iterator[None]:
        """While a forwarded call is in flight, the upstream's log messages go to it."""
        self._calls.append(call)
        try:
            yield
        finally:
            self._calls.remove(call)

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        for call in list(self._calls):  # each call's session sends only what its request opted in to
            await call.send_log_message(params.level, params.data, params.logger)

    async def note_host(self, ctx: Context, call_next: CallNext) -> HandlerResult:
        """Middleware: the connection of a host of an earlier protocol version, for the notifications it takes
        outside any request (a 2026-07-28 host takes them on its listen streams only)."""
        if ctx.session.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            self._handshake_host = ctx.session
        return await call_next(ctx)

    def notification_options(self) -> NotificationOptions:
        """The list changes a host of an earlier version is told it gets: those the upstream announces."""
        upstream = self._connected().server_capabilities
        return NotificationOptions(prompts_changed=bool(upstream.prompts and upstream.prompts.list_changed),
                                   resources_changed=bool(upstream.resources and upstream.resources.list_changed),
                                   tools_changed=bool(upstream.tools and upstream.tools.list_changed))

    async def run(self, upstream: Client, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Relay ``upstream``'s events until cancelled (started with ``TaskGroup.start``: ready once it returns)."""
        self._upstream = upstream
        async with anyio.create_task_group() as streams:
            self._streams = streams
            task_status.started()
            await self._follow_list_changes(upstream)
            await anyio.sleep_forever()

    async def message(self, message: IncomingMessage) -> None:
        """The upstream client's message handler: an earlier version's bare change notifications. Those of a
        2026-07-28 upstream carry their listen stream's id and arrive through ``_follow_*`` already."""
        if isinstance(message, Exception):
            return
        params = message.params.model_dump(by_alias=True, mode="json") if message.params is not None else None
        if params is not None and SUBSCRIPTION_ID_META_KEY in (params.get("_meta") or {}):
            return
        event = event_from_wire(message.method, params)
        if event is not None:
            await self._relay(event)

    async def listen(self, context: Context, params: types.SubscriptionsListenRequestParams) -> Any:
        """``subscriptions/listen`` of a 2026-07-28 host: the resources it names are followed upstream while its
        stream lasts."""
        async with self._interested(params.notifications.resource_subscriptions or ()):
            return await self._listen(context, params)

    async def subscribe(self, context: Context, params: types.SubscribeRequestParams) -> types.EmptyResult:
        await self._want(str(params.uri))
        return types.EmptyResult()

    async def unsubscribe(self, context: Context, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        await self._unwant(str(params.uri))
        return types.EmptyResult()

    async def _relay(self, event: ServerEvent) -> None:
        await self.bus.publish(event)
        host = self._handshake_host
        if host is None or (isinstance(event, ResourceUpdated) and event.uri not in self._interest):
            return
        try:
            if isinstance(event, ToolsListChanged):
                await host.send_tool_list_changed()
            elif isinstance(event, PromptsListChanged):
                await host.send_prompt_list_changed()
            elif isinstance(event, ResourcesListChanged):
                await host.send_resource_list_changed()
            else:
                await host.send_resource_updated(event.uri)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            log.debug("the host left before a change reached it")  # the proxy is ending with it

    async def _follow_list_changes(self, upstream: Client) -> None:
        try:
            async with upstream.listen(tools_list_changed=True, prompts_list_changed=True,
                                       resources_list_changed=True) as changes:
                async for event in changes:
                    await self._relay(event)
        except ListenNotSupportedError:
            pass  # an earlier version's upstream: its notifications come through ``message``
        except (SubscriptionLost, MCPError) as error:
            log.info("the upstream's list changes are not streamed: %s", type(error).__name__)

    @asynccontextmanager
    async def _interested(self, uris: Sequence[str]) -> AsyncIterator[None]:
        held: list[str] = []
        try:
            for uri in uris:
                await self._want(uri)
                held.append(uri)
            yield
        finally:
            with anyio.CancelScope(shield=True):
                for uri in held:
                    try:
                        await self._unwant(uri)
                    except MCPError as error:
                        log.info("the upstream refused an unsubscribe: %s", type(error).__name__)

    async def _want(self, uri: str) -> None:
        async with self._follow_lock:
            if self._interest.get(uri, 0) == 0:
                await self._follow(uri)
            self._interest[uri] = self._interest.get(uri, 0) + 1

    async def _unwant(self, uri: str) -> None:
        async with self._follow_lock:
            count = self._interest.get(uri, 0)
            if count > 1:
                self._interest[uri] = count - 1
            elif count == 1:
                del self._interest[uri]
                await self._unfollow(uri)

    async def _follow(self, uri: str) -> None:
        upstream = self._connected()
        if upstream.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            request = types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri))
            await upstream.session.send_request(request, types.EmptyResult)
        elif self._streams is not None:
            self._followed[uri] = await self._streams.start(self._follow_resource, upstream, uri)

    async def _unfollow(self, uri: str) -> None:
        upstream = self._connected()
        if upstream.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            request = types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=uri))
            await upstream.session.send_request(request, types.EmptyResult)
        elif (stream := self._followed.pop(uri, None)) is not None:
            stream.cancel()

    async def _follow_resource(self, upstream: Client, uri: str,
                               task_status: TaskStatus[anyio.CancelScope] = anyio.TASK_STATUS_IGNORED) -> None:
        with anyio.CancelScope() as scope:
            async with upstream.listen(resource_subscriptions=[uri]) as updates:
                task_status.started(scope)
                try:
                    async for event in updates:
                        await self._relay(event)
                except (SubscriptionLost, MCPError) as error:
                    log.info("the upstream ended a resource's update stream: %s", type(error).__name__)

    def _connected(self) -> Client:
        if self._upstream is None:
            raise RuntimeError("the relay is not running")
        return self._upstream
