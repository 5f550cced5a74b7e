"""Synthetic representations: what a model sees instead of the observation, built in the same pass as the put.

Long text: its size, then its beginning and its end. Binary: size and a SHA-256 prefix. Structured: count and
schema of ``entries``/``matches``/``results``-like lists, never their items, plus a few retained scalars.
"""

from __future__ import annotations

import hashlib
from typing import Any

from vault.row.chunks import Chunk, clean_text

EDGE_CHARS = 240  # characters shown from each end of long text
WHOLE_TEXT_CHARS = 2 * EDGE_CHARS + 40  # up to this, the summary shows the text whole
LIST_FIELDS = ("entries", "matches", "results", "items", "files", "rows", "records", "hits", "data", "lines")
SCALAR_FIELDS = ("count", "total", "total_count", "truncated", "size", "message", "error", "status")
MAX_SCALAR_CHARS = 200
MAX_KEYS_SHOWN = 20


class SummaryBuilder:
    """Fed every plaintext chunk as it is sealed; ``finish`` returns (summary, retained scalars)."""

    def __init__(self, kind: str, value: Any = None) -> None:
        self._kind = kind
        self._json_value = value
        self._head: bytes | memoryview = b""
        self._tail: list[bytes | memoryview] = []
        self._units = 0
        self._bytes = 0
        self._sha256 = hashlib.sha256() if kind == "binary" else None

    def feed(self, chunk: Chunk) -> None:
        """Account for one chunk (text: keeps the first and the last two chunks for the beginning and end)."""
        self._units += chunk.units
        self._bytes += len(chunk.data)
        if self._sha256 is not None:
            self._sha256.update(chunk.data)
        elif self._kind == "text":  # references, not copies: at most the first and the last two chunks
            if not self._head:
                self._head = chunk.data
            self._tail = [*self._tail[-1:], chunk.data]

    def finish(self) -> tuple[str, dict[str, Any]]:
        """The summary text and the retained scalars, as valid Unicode (lone surrogates become U+FFFD)."""
        summary, retained = self._finish()
        return clean_text(summary), {k: clean_text(v) if isinstance(v, str) else v for k, v in retained.items()}

    def _finish(self) -> tuple[str, dict[str, Any]]:
        if self._sha256 is not None:
            digest = self._sha256.hexdigest()[:16]
            return f"binary, {self._bytes:,} bytes, sha256 {digest}…", {"size": self._bytes, "sha256_prefix": digest}
        if self._kind == "json":
            return summarize_json(self._json_value, self._units)
        return self._text_summary()

    def _text_summary(self) -> tuple[str, dict[str, Any]]:
        retained = {"chars": self._units}
        header = f"text, {self._units:,} chars"
        if self._units <= WHOLE_TEXT_CHARS:
            return f"{header}: {b''.join(self._tail).decode('utf-8', 'replace')}", retained
        edge_bytes = 4 * EDGE_CHARS  # enough UTF-8 for EDGE_CHARS characters; a cut character is not shown
        head = str(self._head[:edge_bytes], "utf-8", "replace")[:EDGE_CHARS]
        tail_bytes = b"".join(bytes(part[-edge_bytes:]) for part in self._tail)[-edge_bytes:]
        tail = tail_bytes.decode("utf-8", "replace")[-EDGE_CHARS:]
        return f"{header}\nbegins: {head}\n…\nends: {tail}", retained


def summarize_json(value: Any, chars: int) -> tuple[str, dict[str, Any]]:
    """Shape, counts and retained scalars of a JSON value; list items never appear."""
    retained: dict[str, Any] = {}
    if isinstance(value, list):
        retained["count"] = len(value)
        return f"json list, {len(value):,} items{_item_schema(value)}, {chars:,} chars", retained
    parts = [f"json object, {len(value):,} keys, {chars:,} chars"]
    keys = list(value)
    shown = ", ".join(_short(k, 40) for k in keys[:MAX_KEYS_SHOWN])
    parts.append(f"keys: {shown}{', …' if len(keys) > MAX_KEYS_SHOWN else ''}")
    for name in LIST_FIELDS:
        items = value.get(name)
        if isinstance(items, list):
            retained[f"{name}_count"] = len(items)
            parts.append(f"{name}: {len(items):,} items{_item_schema(items)}")
    for name in SCALAR_FIELDS:
        scalar = value.get(name)
        if isinstance(scalar, bool | int | float) or (scalar is None and name in value):
            retained[name] = scalar
        elif isinstance(scalar, str):
            retained[name] = _short(scalar, MAX_SCALAR_CHARS)
    return "\n".join(parts), retained


def _item_schema(items: list[Any]) -> str:
    """The fields of the first few object items and their JSON types, e.g. ' of {name: str, size: int}'."""
    fields: dict[str, str] = {}
    types: set[str] = set()
    for item in items[:20]:
        types.add(_type_name(item))
        if isinstance(item, dict):
            for key, child in list(item.items())[:MAX_KEYS_SHOWN]:
                fields.setdefault(_short(key, 40), _type_name(child))
    if fields:
        return " of {" + ", ".join(f"{name}: {kind}" for name, kind in fields.items()) + "}"
    return f" of {' | '.join(sorted(types))}" if types else ""


def _type_name(value: Any) -> str:
    names = {bool: "bool", int: "int", float: "float", str: "str", dict: "object", list: "list"}
    return "null" if value is None else names.get(type(value), "value")


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
