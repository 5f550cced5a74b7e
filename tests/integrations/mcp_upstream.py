"""The upstream MCP server the proxy tests put behind ``scratchvault mcp --wrap``: a small ``MCPServer`` of the SDK
with a tool returning a 2 MB page, small and structured results, a failing tool, an image, a resource and a
prompt; a tool reporting progress and logging during its call, a slow one that records its cancellation, one
announcing that its lists changed, one adding a tool (and announcing it), one announcing a resource's update and one
counting the ``subscriptions/listen`` streams open on it. Run as ``python -m tests.integrations.mcp_upstream``
(stdio); it says on stderr that it started."""

from __future__ import annotations

import base64
import sys
from collections.abc import Callable

import anyio
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.subscriptions import InMemorySubscriptionBus, ServerEvent
from pydantic import BaseModel

PAGE = "".join(f"{i:07} CANARY-upstream page line\n" for i in range(64_000))  # about 2 MB


class CountingBus(InMemorySubscriptionBus):
    """The server's subscription bus, counting the listen streams open on it."""

    def __init__(self) -> None:
        super().__init__()
        self.open = 0

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        unsubscribe, ended = super().subscribe(listener), False
        self.open += 1

        def end() -> None:
            nonlocal ended
            if not ended:
                ended, self.open = True, self.open - 1
            unsubscribe()

        return end


bus = CountingBus()
server = MCPServer("upstream", subscriptions=bus)


@server.tool()
def fetch_page() -> str:
    """A large page."""
    return PAGE


@server.tool()
def small() -> str:
    """A small answer."""
    return "tiny answer"


class Listing(BaseModel):
    files: list[str]


@server.tool()
def listing() -> Listing:
    """A large structured result (structured content, and its JSON as text)."""
    return Listing(files=[f"/srv/f{i:05}.csv" for i in range(5000)])


@server.tool()
def broken() -> str:
    """Always fails."""
    raise ValueError("upstream refused: no such page")


@server.tool()
def picture() -> Image:
    """An image (passes as it is, whatever its size)."""
    return Image(data=base64.b64decode(base64.b64encode(bytes(20_000))), format="png")


@server.tool()
async def working(steps: int, ctx: Context) -> str:
    """Reports progress at each step and logs a message before and after (notifications during a call)."""
    await ctx.info("working: started")
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step} of {steps}")
    await ctx.warning({"working": "finished", "steps": steps})
    return f"worked {steps} steps"


@server.tool()
async def slow(marker: str) -> str:
    """Waits an hour: writes "started" to the file ``marker`` names, then "cancelled" once it is cancelled."""
    await anyio.Path(marker).write_text("started")
    try:
        await anyio.sleep(3600)
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            await anyio.Path(marker).write_text("cancelled")
        raise
    return "slept"


@server.tool()
async def announce(ctx: Context) -> str:
    """Announces that its tools, prompts and resources changed (to the clients' ``subscriptions/listen`` streams)."""
    await ctx.notify_tools_changed()
    await ctx.notify_prompts_changed()
    await ctx.notify_resources_changed()
    return "announced"


def grown() -> str:
    """A tool added while the server runs."""
    return "grown"


@server.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool ``grown`` and announces that the tools changed."""
    server.add_tool(grown)
    await ctx.notify_tools_changed()
    return "grew"


@server.tool()
async def touch(uri: str, ctx: Context) -> str:
    """Announces that the resource ``uri`` was updated (to the listen streams subscribed to it)."""
    await ctx.notify_resource_updated(uri)
    return "touched"


@server.tool()
def listening() -> str:
    """How many listen streams are open on this server."""
    return str(bus.open)


@server.resource("page://readme")
def readme() -> str:
    """A resource."""
    return "the upstream's readme"


@server.prompt()
def summarise(topic: str) -> str:
    """A prompt."""
    return f"Summarise {topic}."


if __name__ == "__main__":
    print("upstream: started", file=sys.stderr, flush=True)
    server.run("stdio")
