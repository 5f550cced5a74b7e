"""What the upstream sends on its own passes through ``scratchvault mcp --wrap`` to the host, with the MCP SDK's
client in front and the tests' upstream MCP server behind (tests/integrations/mcp_upstream.py): a call's progress
against the host's progress token, the call's log messages at the level the host opted in to, list changes to
the host's subscription; and a call the host cancels is cancelled upstream, the proxy serving on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import stdio_client
from mcp.shared.subscriptions import PromptsListChanged, ResourcesListChanged, ToolsListChanged

from tests.integrations.test_mcp_proxy import proxy

WAIT = 60  # seconds: two processes start on a loaded machine


def host(where: Path, scenario: Any, **callbacks: Any) -> str:
    """Run ``scenario(client)`` against a proxy launched as a host launches it; returns the host's stderr."""
    errlog = where / "stderr"

    async def main() -> None:
        with errlog.open("w") as stderr:
            async with Client(stdio_client(proxy(where / "proxy.db", where / "keyring.json"), errlog=stderr),
                              read_timeout_seconds=WAIT, **callbacks) as client:
                await scenario(client)

    anyio.run(main)
    return errlog.read_text()


@pytest.mark.parametrize(("level", "expected"), [
    ("debug", [("info", "working: started"), ("warning", {"working": "finished", "steps": 3})]),
    ("warning", [("warning", {"working": "finished", "steps": 3})]),
])
def test_a_calls_progress_and_log_messages_reach_the_host_at_its_level(tmp_path, level, expected):
    progress: list[tuple] = []
    logged: list[tuple] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    async def on_log(params: Any) -> None:
        logged.append((params.level, params.data))

    async def scenario(client: Client) -> None:
        answer = await client.call_tool("working", {"steps": 3}, progress_callback=on_progress)
        assert answer.content[0].text == "worked 3 steps"

    host(tmp_path, scenario, logging_callback=on_log, log_level=level)
    assert progress == [(step, 3, f"step {step} of 3") for step in (1, 2, 3)]
    assert logged == expected


def test_the_upstreams_list_changes_reach_the_hosts_subscription(tmp_path):
    async def scenario(client: Client) -> None:
        async with client.listen(tools_list_changed=True, prompts_list_changed=True,
                                 resources_list_changed=True) as changes:
            assert (await client.call_tool("announce", {})).content[0].text == "announced"
            seen = []
            with anyio.fail_after(WAIT):
                async for event in changes:
                    seen.append(event)
                    if len(seen) == 3:
                        break
        assert seen == [ToolsListChanged(), PromptsListChanged(), ResourcesListChanged()]

    host(tmp_path, scenario)


def test_a_call_the_host_cancels_is_cancelled_upstream_and_the_proxy_serves_on(tmp_path):
    marker = tmp_path / "slow.state"

    async def scenario(client: Client) -> None:
        async with anyio.create_task_group() as calls:
            calls.start_soon(client.call_tool, "slow", {"marker": str(marker)})
            with anyio.fail_after(WAIT):
                while not marker.exists():
                    await anyio.sleep(0.05)
            calls.cancel_scope.cancel()  # the SDK's client sends notifications/cancelled for the call
        with anyio.fail_after(WAIT):
            while marker.read_text() != "cancelled":
                await anyio.sleep(0.05)
        assert (await client.call_tool("small", {})).content[0].text == "tiny answer"

    host(tmp_path, scenario)
    assert marker.read_text() == "cancelled"
