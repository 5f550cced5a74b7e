"""Print the ``scratchpad_read`` declaration in the shapes OpenAI, Anthropic and MCP expect.

    python examples/tool_shapes.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vault import tool_declaration

WHERE = {
    "openai": "OpenAI Chat Completions: tools=[...]",
    "anthropic": "Anthropic Messages: tools=[...]",
    "mcp": "MCP: an entry of the tools/list result",
}


def main() -> int:
    """Print each shape under a heading saying where it goes."""
    for shape, where in WHERE.items():
        print(f"== {shape} ({where}) ==")
        print(json.dumps(tool_declaration(shape), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
