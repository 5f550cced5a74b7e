"""List changes and a resource's updates pass through ``scratchvault mcp --wrap`` in the form the host's protocol
version expects, whichever version the upstream speaks: the MCP SDK's client in front (a host of 2026-07-28 on its
``subscriptions/listen`` streams, a host of the ``initialize`` handshake with bare notifications), behind it the
tests' ``MCPServer`` (2026-07-28, tests/integrations/mcp_upstream.py) or a low-level ``Server`` speaking only the
handshake versions (tests/integrations/mcp_upstream_handshake.py). The host's subscriptions to a resource reach
the upstream and end there when the host's interest ends; tools listed after a change carry scratchpad_read."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import stdio_client
from mcp.shared.subscriptions import ResourceUpdated, ToolsListChanged

from tests.integrations.test_mcp_proxy import UPSTREAM, proxy

WAIT = 60  # seconds: two processes start on a loaded machine
HANDSHAKE_UPSTREAM = [sys.executable, "-m", "tests.integrations.mcp_upstream_handshake"]
README = "page://readme"
# each upstream, with the tool saying what of the resource it follows for the proxy, and its answer while it does
# and once it does not: a handshake upstream names its subscriptions, a current one counts its listen streams (the
# proxy holds one for list changes, and one per resource followed)
UPSTREAMS = pytest.mark.parametrize(("upstream", "state", "following", "idle"), [
    (HANDSHAKE_UPSTREAM, "subscribed", README, ""), (UPSTREAM, "listening", "2", "1")],
    ids=["handshake-upstream", "current-upstream"])
LIST_CHANGES = ["notifications/tools/list_changed", "notifications/prompts/list_changed",
                "notifications/resources/list_changed"]
pytestmark = pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")


class Notices:
    """What a handshake host's client hands its message handler, in order."""

    def __init__(self) -> None:
        self.send, self.receive = anyio.create_memory_object_stream[Any](64)

    async def handler(self, message: Any) -> None:
        if not isinstance(message, Exception):
            await self.send.send(message)

    async def next(self, count: int = 1) -> list[Any]:
        with anyio.fail_after(WAIT):
            return [await self.receive.receive() for _ in range(count)]


def host(where: Path, upstream: list[str], scenario: Any, **options: Any) -> None:
    async def main() -> None:
        with (where / "stderr").open("w") as stderr:
            params = proxy(where / "proxy.db", where / "keyring.json", upstream=upstream)
            async with Client(stdio_client(params, errlog=stderr), read_timeout_seconds=WAIT, **options) as client:
                await scenario(client)

    anyio.run(main)


async def said(client: Client, tool: str, **arguments: str) -> str:
    return (await client.call_tool(tool, arguments)).content[0].text


async def tool_names(client: Client) -> list[str]:
    return [tool.name for tool in (await client.list_tools()).tools]


async def upstream_state_becomes(client: Client, state: str, expected: str) -> None:
    with anyio.fail_after(WAIT):
        while await said(client, state) != expected:
            await anyio.sleep(0.05)


async def next_event(changes: Any) -> Any:
    with anyio.fail_after(WAIT):
        return await changes.__anext__()


@UPSTREAMS
def test_a_handshake_host_gets_the_upstreams_list_changes_and_a_subscribed_resources_updates(
        tmp_path, upstream, state, following, idle):
    notices = Notices()

    async def scenario(client: Client) -> None:
        assert await said(client, "announce") == "announced"
        assert [notice.method for notice in await notices.next(3)] == LIST_CHANGES
        assert await said(client, "grow") == "grew"
        assert [notice.method for notice in await notices.next()] == LIST_CHANGES[:1]
        assert {"grown", "scratchpad_read"} <= set(await tool_names(client))
        await client.subscribe_resource(README)
        assert await said(client, state) == following
        assert await said(client, "touch", uri=README) == "touched"
        (updated,) = await notices.next()
        assert isinstance(updated, types.ResourceUpdatedNotification) and updated.params.uri == README
        await client.unsubscribe_resource(README)
        await upstream_state_becomes(client, state, idle)

    host(tmp_path, upstream, scenario, mode="legacy", message_handler=notices.handler)


@UPSTREAMS
def test_a_current_hosts_listen_stream_gets_the_upstreams_list_changes_and_its_resources_updates(
        tmp_path, upstream, state, following, idle):
    async def scenario(client: Client) -> None:
        async with client.listen(tools_list_changed=True, resource_subscriptions=[README]) as changes:
            assert await said(client, state) == following
            assert await said(client, "grow") == "grew"
            assert await next_event(changes) == ToolsListChanged()
            assert {"grown", "scratchpad_read"} <= set(await tool_names(client))
            assert await said(client, "touch", uri=README) == "touched"
            assert await next_event(changes) == ResourceUpdated(uri=README)
        await upstream_state_becomes(client, state, idle)  # the stream's end ends the upstream's following

    host(tmp_path, upstream, scenario)
