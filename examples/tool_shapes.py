"""Print the ``scratchpad_read`` declaration in the shapes OpenAI (Chat Completions and Responses, lenient and
strict), Anthropic and MCP expect.

    python examples/tool_shapes.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vault import tool_declaration

WHERE = [  # (shape, strict, where it goes)
    ("openai", False, "OpenAI Chat Completions: tools=[...]"),
    ("openai", True, "OpenAI Chat Completions, strict mode: every field required, null for an unused one"),
    ("openai-responses", False, "OpenAI Responses API: tools=[...], the flat function tool"),
    ("openai-responses", True, "OpenAI Responses API, strict mode (the OpenAI Agents SDK's default)"),
    ("anthropic", False, "Anthropic Messages: tools=[...]"),
    ("mcp", False, "MCP: an entry of the tools/list result"),
]


def main() -> int:
    """Print each shape under a heading saying where it goes."""
    for shape, strict, where in WHERE:
        print(f"== {shape}{' strict' if strict else ''} ({where}) ==")
        print(json.dumps(tool_declaration(shape, strict=strict), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
