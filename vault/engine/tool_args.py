"""Checks a model's ``scratchpad_read`` arguments against the declared schema, with messages meant for the model.

A model's arguments are untrusted: a dict from the vendor SDK, or the raw JSON string some SDKs hand over.
Anything outside the schema is an ``InvalidArgument`` whose message tells the model what to fix, and echoes at
most a short, shortened field name. One deliberate departure from the schema: an ``id`` string that does not
match the id pattern is not a schema error, so that a malformed id gets the same "not found" answer as an id
of another user, of another turn, expired or absent (the caller decides that answer). Null for ``n``,
``start`` or ``end`` is the field left out, as OpenAI's strict mode sends an unused field; ``mode`` has no null.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from vault.engine.tool import SCRATCHPAD_READ_TOOL
from vault.errors import InvalidArgument
from vault.inputs import check_read_window
from vault.row.finding import DEFAULT_MATCHES, FindRequest

SCHEMA: dict[str, Any] = SCRATCHPAD_READ_TOOL["parameters"]
FIELDS = frozenset(SCHEMA["properties"])
MODES = tuple(SCHEMA["properties"]["mode"]["enum"])
DEFAULT_MODE: str = SCHEMA["properties"]["mode"]["default"]
DEFAULT_N: int = SCHEMA["properties"]["n"]["default"]
MAX_UNITS = 2**53 - 1  # the largest integer every JSON consumer holds exactly; more is a "huge number"
MAX_ARGUMENTS_CHARS = 64 * 1024  # a JSON string of arguments longer than this is refused before parsing
_NAME_CHARS = 40


@dataclass(frozen=True, slots=True)
class ReadRequest:
    """A schema-valid ``scratchpad_read`` call (``id`` is any str; its form is checked by the vault)."""

    id: str
    mode: str
    n: int
    start: int | None
    end: int | None
    find: FindRequest | None = None  # mode find: what to look for


def parse_arguments(arguments: object) -> ReadRequest:
    """The request the arguments describe, or InvalidArgument naming the first problem found."""
    if isinstance(arguments, str):
        arguments = _loads(arguments)
    if not isinstance(arguments, dict):
        raise InvalidArgument(f"arguments must be a JSON object, not {_json_type(arguments)}")
    unknown = [key for key in arguments if key not in FIELDS]
    if unknown:
        names = ", ".join(_short(key) for key in unknown[:5])
        raise InvalidArgument(f"unknown argument(s): {names}; allowed: {', '.join(sorted(FIELDS))}")
    if "id" not in arguments:
        raise InvalidArgument("missing required argument: id")
    row_id = arguments["id"]
    if not isinstance(row_id, str):
        raise InvalidArgument(f"id must be a string, not {_json_type(row_id)}")
    mode = arguments.get("mode", DEFAULT_MODE)
    if not isinstance(mode, str) or mode not in MODES:
        raise InvalidArgument(f"mode must be one of {', '.join(MODES)}")
    given = {name: arguments.get(name) for name in FIELDS}  # null is the field left out
    start = None if given["start"] is None else _units(given["start"], "start")
    end = None if given["end"] is None else _units(given["end"], "end")
    check_read_window(mode, start, end)
    if mode == "find":
        n = DEFAULT_MATCHES if given["n"] is None else _units(given["n"], "n")
        return ReadRequest(row_id, mode, n, start, end, _find(given["query"], n, given["ignore_case"]))
    if given["query"] is not None or given["ignore_case"] is not None:
        raise InvalidArgument("query and ignore_case are only allowed with mode 'find'")
    n = DEFAULT_N if given["n"] is None else _units(given["n"], "n")
    return ReadRequest(row_id, mode, n, start, end)


def _find(query: object, n: int, ignore_case: object) -> FindRequest:
    """What mode find looks for; its own InvalidArgument names the field to fix."""
    if query is None:
        raise InvalidArgument("mode 'find' needs query, the text to look for")
    if not isinstance(query, str):
        raise InvalidArgument(f"query must be a string, not {_json_type(query)}")
    if ignore_case is not None and not isinstance(ignore_case, bool):
        raise InvalidArgument(f"ignore_case must be a boolean, not {_json_type(ignore_case)}")
    return FindRequest(query, n, bool(ignore_case))


def _loads(text: str) -> object:
    """Arguments given as a JSON string (as some SDKs pass them), parsed within bounds."""
    if len(text) > MAX_ARGUMENTS_CHARS:
        raise InvalidArgument(f"arguments are longer than {MAX_ARGUMENTS_CHARS} characters")
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # bad JSON, an over-long integer literal, absurd nesting
        raise InvalidArgument("arguments are not valid JSON") from None


def _units(value: object, name: str) -> int:
    """A JSON-Schema integer (an integral float counts, a bool does not) in [0, MAX_UNITS]."""
    if isinstance(value, float) and value.is_integer():  # False for nan and inf
        value = int(value)
    if type(value) is not int:
        raise InvalidArgument(f"{name} must be an integer, not {_json_type(value)}")
    if not 0 <= value <= MAX_UNITS:
        raise InvalidArgument(f"{name} must be between 0 and {MAX_UNITS}")
    return value


def _json_type(value: object) -> str:
    """The JSON name of a value's type, for messages (never the value itself)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _short(key: object) -> str:
    """A field name as the model wrote it, shortened so a huge key cannot flood the tool result."""
    text = repr(key)
    return text if len(text) <= _NAME_CHARS else text[:_NAME_CHARS] + "…"
