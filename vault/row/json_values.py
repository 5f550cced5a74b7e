"""Structured observations: the JSON text stored for a dict or list, and the walk that checks a value before it
is written (str keys, finite numbers, bounded depth and written-out length, no reference cycle)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, cast

from vault.errors import InvalidArgument
from vault.row.chunks import SURROGATE

MAX_JSON_DEPTH = 256
_INFINITIES = (float("inf"), float("-inf"))
MAX_JSON_TEXT = 256 * 1024 * 1024  # characters a JSON observation may take written out (larger: a stream)
_TOO_LONG = (f"observation would take more than {MAX_JSON_TEXT:,} characters written out as JSON (a part shared "
             "by reference many times?); store it as a stream instead")


def encode_json(value: dict[str, Any] | list[Any]) -> str:
    """The JSON text stored for a structured observation; non-JSON values are InvalidArgument."""
    check_json_value(value)
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
        if SURROGATE.search(text):
            text = json.dumps(value, ensure_ascii=True, allow_nan=False)  # escapes keep lone surrogates exact
    except (ValueError, RecursionError):  # e.g. an int longer than Python converts to text (4,300 digits)
        raise InvalidArgument("observation holds a value that cannot be written as JSON") from None
    return text


def check_json_value(value: object) -> None:
    """Walk a JSON value without recursion: str keys, finite numbers, depth at most MAX_JSON_DEPTH, no reference
    cycle, and at most MAX_JSON_TEXT characters once written out (estimated as it is walked). A tree (what
    json.loads makes) is walked once; a container met twice (shared by reference, or a cycle) sends the value to
    ``_check_shared``, which walks each container once: 60 levels of ``[x, x]`` are 120 objects but 2**60 values,
    and 2,000 references to one 1 MiB string are 2 GiB of text, each refused in time linear in the objects."""
    stack: list[tuple[object, int]] = [(value, 0)]
    met: set[int] = set()  # ids of the containers walked (all alive: ``value`` holds them)
    text = 0
    while stack:
        item, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise InvalidArgument(f"observation is nested deeper than {MAX_JSON_DEPTH} levels")
        if isinstance(item, dict):
            if id(item) in met:
                return _check_shared(cast("dict | list", value))  # a container met twice: the root is one
            met.add(id(item))
            text += 2 + 4 * len(item)
            for key, child in item.items():
                if not isinstance(key, str):
                    raise InvalidArgument("JSON object keys must be str")
                text += len(key)
                stack.append((child, depth + 1))
        elif isinstance(item, list):
            if id(item) in met:
                return _check_shared(cast("dict | list", value))  # a container met twice: the root is one
            met.add(id(item))
            text += 2 + len(item)
            stack.extend((child, depth + 1) for child in item)
        else:
            text += _scalar_text(item)
        if text > MAX_JSON_TEXT:
            raise InvalidArgument(_TOO_LONG)
    return None


def _check_shared(value: dict | list) -> None:
    """``check_json_value`` for a value that holds some container more than once: each container is walked once,
    and its written-out length and height (how deep it nests) are reused by every container that holds it."""
    written: dict[int, tuple[int, int]] = {}  # id of a finished container -> (written-out length, height)
    open_ids: set[int] = set()  # containers being walked: the path from the root
    stack: list[tuple[dict | list, int, bool]] = [(value, 0, False)]
    while stack:
        container, depth, finished = stack.pop()
        if finished:
            open_ids.discard(id(container))
            written[id(container)] = _written_size(container, written)
        elif id(container) not in written:
            open_ids.add(id(container))
            stack.append((container, depth, True))
            stack.extend((child, depth + 1, False) for child in _children(container, depth, open_ids, written))
    if written[id(value)][1] > MAX_JSON_DEPTH:  # the first path to a shared part need not be its deepest
        raise InvalidArgument(f"observation is nested deeper than {MAX_JSON_DEPTH} levels")


def _children(container: dict | list, depth: int, open_ids: set[int], written: dict[int, tuple[int, int]]) -> list:
    """The containers of ``container`` still to walk; its keys and scalars checked on the way."""
    if container and depth + 1 > MAX_JSON_DEPTH:
        raise InvalidArgument(f"observation is nested deeper than {MAX_JSON_DEPTH} levels")
    if isinstance(container, dict):
        if not all(isinstance(key, str) for key in container):
            raise InvalidArgument("JSON object keys must be str")
        values: Iterable[object] = container.values()
    else:
        values = container
    pending = []
    for child in values:
        if not isinstance(child, dict | list):
            _scalar_text(child)
        elif id(child) in open_ids:
            raise InvalidArgument("observation holds a reference cycle, which JSON cannot represent")
        elif id(child) not in written:
            pending.append(child)
    return pending


def _written_size(container: dict | list, written: dict[int, tuple[int, int]]) -> tuple[int, int]:
    """(written-out length, height) of ``container``, all of its containers already measured; a length over
    MAX_JSON_TEXT is refused."""
    if isinstance(container, dict):
        values: Iterable[object] = container.values()
        text = 2 + 4 * len(container) + sum(map(len, container))
    else:
        values, text = container, 2 + len(container)
    height = 0
    for child in values:
        if isinstance(child, dict | list):
            child_text, child_height = written[id(child)]
            text += child_text
            height = max(height, child_height + 1)
        else:
            text += _scalar_text(child)
            height = max(height, 1)
    if text > MAX_JSON_TEXT:
        raise InvalidArgument(_TOO_LONG)
    return text, height


def _scalar_text(item: object) -> int:
    """About how many characters a JSON scalar takes written out; anything else is InvalidArgument."""
    if isinstance(item, str):
        return len(item) + 2
    if isinstance(item, int):  # bool included
        return item.bit_length() // 3 + 2
    if isinstance(item, float):
        if item != item or item in _INFINITIES:
            raise InvalidArgument("observation holds a non-finite number, which JSON cannot represent")
        return 24
    if item is None:
        return 4
    raise InvalidArgument(f"observation holds a {type(item).__name__}, which is not a JSON value")
