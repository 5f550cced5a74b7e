"""The ``scratchpad_read`` tool declaration, in the neutral JSON-schema form and in each vendor's shape."""

from __future__ import annotations

import copy
from typing import Any

from vault.errors import InvalidArgument

_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "pattern": "^[0-9a-f]{32}$",
               "description": "The id of a stored observation, from its representation."},
        "mode": {"type": "string", "enum": ["head", "tail", "range", "full"], "default": "head",
                 "description": "head: first n units; tail: last n; range: [start, end); full: everything "
                                "(capped)."},
        "n": {"type": "integer", "minimum": 0, "default": 2000,
              "description": "How many units for head and tail."},
        "start": {"type": "integer", "minimum": 0, "description": "range only: first unit, inclusive."},
        "end": {"type": "integer", "minimum": 0, "description": "range only: last unit, exclusive."},
    },
    "required": ["id"],
    "additionalProperties": False,
}

SCRATCHPAD_READ_TOOL: dict[str, Any] = {
    "name": "scratchpad_read",
    "description": (
        "Read a slice of a large observation that was stored instead of being shown in full. Units are "
        "characters for text and JSON, bytes for binary (returned as Base64). Reads are capped; a capped "
        "result says truncated=true."
    ),
    "parameters": _PARAMETERS,
}


def tool_declaration(shape: str = "neutral") -> dict[str, Any]:
    """A fresh copy of the declaration as ``neutral``, ``openai``, ``anthropic`` or ``mcp`` expects it."""
    name, description = SCRATCHPAD_READ_TOOL["name"], SCRATCHPAD_READ_TOOL["description"]
    schema = copy.deepcopy(_PARAMETERS)
    if shape == "neutral":
        return {"name": name, "description": description, "parameters": schema}
    if shape == "openai":
        return {"type": "function", "function": {"name": name, "description": description, "parameters": schema}}
    if shape == "anthropic":
        return {"name": name, "description": description, "input_schema": schema}
    if shape == "mcp":
        return {"name": name, "description": description, "inputSchema": schema}
    raise InvalidArgument("shape must be one of neutral, openai, anthropic, mcp")
