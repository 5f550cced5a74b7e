"""The ``scratchpad_read`` tool declaration, in the neutral JSON-schema form and in each vendor's shape.

Two schemas: the lenient one (optional fields with defaults; its shapes pinned by a test) and
OpenAI's strict one (every field required, the unused ones sent as null, no ``default``), which the parser
accepts too: null for ``n``, ``start``, ``end``, ``query`` or ``ignore_case`` means the field is absent.
"""

from __future__ import annotations

import copy
from typing import Any

from vault.errors import InvalidArgument

_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "pattern": "^[0-9a-f]{32}$",
               "description": "The id of a stored observation, from its representation."},
        "mode": {"type": "string", "enum": ["head", "tail", "range", "full", "find"], "default": "head",
                 "description": "head: first n units; tail: last n; range: [start, end); full: everything "
                                "(capped); find: up to n places where query occurs, each with its offset (for a "
                                "range read) and its line."},
        "n": {"type": "integer", "minimum": 0, "default": 2000,
              "description": "How many units for head and tail; how many matches for find (1 to 100, default "
                             "20)."},
        "start": {"type": "integer", "minimum": 0, "description": "range only: first unit, inclusive."},
        "end": {"type": "integer", "minimum": 0, "description": "range only: last unit, exclusive."},
        "query": {"type": "string", "minLength": 1, "maxLength": 200,
                  "description": "find only: the text to look for, literally (not a pattern)."},
        "ignore_case": {"type": "boolean", "default": False,
                        "description": "find only: match regardless of case."},
    },
    "required": ["id"],
    "additionalProperties": False,
}

SCRATCHPAD_READ_TOOL: dict[str, Any] = {
    "name": "scratchpad_read",
    "description": (
        "Read a slice of a large observation that was stored instead of being shown in full, or find where a "
        "text occurs in it (mode find). Units are characters for text and JSON, bytes for binary (returned as "
        "Base64). Reads are capped; a capped result says truncated=true."
    ),
    "parameters": _PARAMETERS,
}

# "start and end only with mode range", said in JSON Schema (if/then), for the new lenient Responses shape;
# the other lenient shapes keep no such rules, and OpenAI's strict mode allows neither if/then nor a root anyOf.
_RANGE_RULE: dict[str, Any] = {
    "if": {"not": {"properties": {"mode": {"const": "range"}}, "required": ["mode"]}},
    "then": {"not": {"anyOf": [{"required": ["start"]}, {"required": ["end"]}]}},
}
_FIND_RULE: dict[str, Any] = {  # query with find, and only there
    "if": {"properties": {"mode": {"const": "find"}}, "required": ["mode"]},
    "then": {"required": ["query"]},
    "else": {"not": {"anyOf": [{"required": ["query"]}, {"required": ["ignore_case"]}]}},
}
_NULLABLE = {"n": "How many units for head and tail (null means 2000); matches for find (null means 20).",
             "start": "range only: first unit, inclusive; null for 0, and always null unless mode is range.",
             "end": "range only: last unit, exclusive; null for the end, and always null unless mode is range.",
             "query": "find only: the text to look for, literally; always null unless mode is find.",
             "ignore_case": "find only: match regardless of case; null means false."}
_NULLABLE_TYPES = {"n": "integer", "start": "integer", "end": "integer", "query": "string", "ignore_case": "boolean"}
STRICT_SHAPES = ("openai", "openai-responses")
SHAPES = ("neutral", "openai", "openai-responses", "anthropic", "mcp")


def strict_parameters() -> dict[str, Any]:
    """The parameters under OpenAI's strict rules: all fields required, ``n``/``start``/``end`` nullable (null
    means absent), no ``default``. ``mode`` is not nullable: a strict model always names it (head is usual)."""
    schema = copy.deepcopy(_PARAMETERS)
    properties = schema["properties"]
    del properties["mode"]["default"]
    properties["mode"]["description"] += " Use head unless another mode is needed."
    for name, description in _NULLABLE.items():
        kind = _NULLABLE_TYPES[name]
        properties[name] = {"type": [kind, "null"], "description": description,
                            **({"minimum": 0} if kind == "integer" else {})}
    schema["required"] = list(properties)
    return schema


def tool_declaration(shape: str = "neutral", *, strict: bool = False) -> dict[str, Any]:
    """A fresh copy of the declaration as ``neutral``, ``openai`` (Chat Completions), ``openai-responses``,
    ``anthropic`` or ``mcp`` expects it. ``strict=True`` (the OpenAI shapes only) gives the strict-mode schema
    and ``"strict": true``. ``openai-responses`` always says ``strict``, since that API turns strict mode on
    when it is left out: ``strict=False`` is ``"strict": false`` with the lenient schema."""
    if shape not in SHAPES:
        raise InvalidArgument(f"shape must be one of {', '.join(SHAPES)}")
    if type(strict) is not bool:
        raise InvalidArgument("strict must be a bool")
    if strict and shape not in STRICT_SHAPES:
        raise InvalidArgument(f"strict applies to the {' and '.join(STRICT_SHAPES)} shapes only")
    name, description = SCRATCHPAD_READ_TOOL["name"], SCRATCHPAD_READ_TOOL["description"]
    schema = strict_parameters() if strict else copy.deepcopy(_PARAMETERS)
    if shape == "neutral":
        return {"name": name, "description": description, "parameters": schema}
    if shape == "openai":
        function = {"name": name, "description": description, "parameters": schema}
        return {"type": "function", "function": {**function, "strict": True} if strict else function}
    if shape == "openai-responses":
        if not strict:
            schema["allOf"] = [copy.deepcopy(_RANGE_RULE), copy.deepcopy(_FIND_RULE)]
        return {"type": "function", "name": name, "description": description, "parameters": schema,
                "strict": strict}
    if shape == "anthropic":
        return {"name": name, "description": description, "input_schema": schema}
    return {"name": name, "description": description, "inputSchema": schema}
