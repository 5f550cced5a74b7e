"""The upstream MCP server the proxy tests put behind ``scratchvault mcp --wrap``: a small ``MCPServer`` of the SDK
with a tool returning a 2 MB page, small and structured results, a failing tool, an image, a resource and a
prompt. Run as ``python -m tests.integrations.mcp_upstream`` (stdio); it says on stderr that it started."""

from __future__ import annotations

import base64
import sys

from mcp.server.mcpserver import Image, MCPServer
from pydantic import BaseModel

PAGE = "".join(f"{i:07} CANARY-upstream page line\n" for i in range(64_000))  # about 2 MB
server = MCPServer("upstream")


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
