"""The plaintext PostgreSQL baseline: the reference module's one table on the vault's server, content in one bytea.

A naive but competent user's schema: the table as the reference module has it, an index on the turn and one on
the expiry, the bytea column with its default storage (EXTENDED: TOAST may compress it, pglz by default), a
plain connection in autocommit (each put is one INSERT, one round trip), results fetched in binary (text format
sends bytea as hex). Slices are ``substr`` on the bytea (bytes; the benchmark's text is ASCII, so characters).
No encryption, no owner, no locks. It exists only to be measured against.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from typing import Any

import psycopg

from vault.storage.postgres.connections import STATEMENT_TIMEOUT_MS

_SCHEMA = """
CREATE TABLE IF NOT EXISTS scratchpad (
    id text PRIMARY KEY, turn_id text NOT NULL, step_num integer NOT NULL, executor_name text NOT NULL,
    content_kind text NOT NULL, content bytea NOT NULL, size_bytes bigint NOT NULL, summary text NOT NULL,
    created_at double precision NOT NULL, expires_at double precision NOT NULL
);
CREATE INDEX IF NOT EXISTS scratchpad_turn ON scratchpad (turn_id);
CREATE INDEX IF NOT EXISTS scratchpad_expiry ON scratchpad (expires_at);
"""
_SLICE = "SELECT content_kind, substr(content, %s, %s) FROM scratchpad WHERE id = %s"
_TAIL = "SELECT content_kind, substr(content, greatest(length(content) - %s + 1, 1), %s) FROM scratchpad WHERE id = %s"


class PlainPgStore:
    """The reference module's storage on PostgreSQL, reduced to what the benchmark exercises."""

    def __init__(self, url: str, storage: str | None = None) -> None:
        """Connect as the vault's connections are set up; ``storage`` (e.g. ``EXTERNAL``) overrides the content
        column's default storage."""
        self._db = psycopg.connect(url, autocommit=True, connect_timeout=10)
        self._db.execute(f"SET statement_timeout = {STATEMENT_TIMEOUT_MS}; SET TimeZone = 'UTC'")
        self._db.execute(_SCHEMA)
        if storage is not None:
            if storage.upper() not in ("PLAIN", "MAIN", "EXTERNAL", "EXTENDED"):
                raise ValueError("storage must be PLAIN, MAIN, EXTERNAL or EXTENDED")
            self._db.execute(f"ALTER TABLE scratchpad ALTER COLUMN content SET STORAGE {storage.upper()}")

    def round_trip(self) -> None:
        """One statement that does nothing: what a round trip to the server costs."""
        self._db.execute("SELECT 1").fetchone()

    def put(self, turn_id: str, step_num: int, executor_name: str, observation: Any, ttl: float = 3600,
            now: float | None = None) -> str:
        """Store an observation in one row (one INSERT, autocommit); returns its id."""
        created = time.time() if now is None else now
        if isinstance(observation, str):
            kind, content = "text", observation.encode()
            summary = observation[:240] + " … " + observation[-240:]
        elif isinstance(observation, bytes):
            kind, content = "binary", observation
            summary = f"binary, {len(content)} bytes, sha256 {hashlib.sha256(content).hexdigest()[:16]}"
        else:
            kind, content = "json", json.dumps(observation, ensure_ascii=False).encode()
            summary = f"json, {len(observation)} items"
        row_id = os.urandom(16).hex()
        self._db.execute(
            "INSERT INTO scratchpad VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (row_id, turn_id, step_num, executor_name, kind, content, len(content), summary, created, created + ttl),
        )
        return row_id

    def read(self, row_id: str, start: int, length: int) -> Any:
        """``substr`` of the content (bytes), decoded when it is text."""
        return _decoded(self._db.execute(_SLICE, (start + 1, length, row_id), binary=True).fetchone())

    def tail(self, row_id: str, length: int) -> Any:
        """The last ``length`` bytes (``length`` of a bytea reads its header, not the value)."""
        return _decoded(self._db.execute(_TAIL, (length, length, row_id), binary=True).fetchone())

    def get(self, row_id: str) -> Any:
        """The whole content."""
        return _decoded(self._db.execute("SELECT content_kind, content FROM scratchpad WHERE id = %s", (row_id,),
                                         binary=True).fetchone())

    def list_for_turn(self, turn_id: str) -> list[tuple]:
        """Metadata and summaries of a turn, by step number."""
        return self._db.execute(
            "SELECT id, step_num, executor_name, content_kind, size_bytes, summary FROM scratchpad "
            "WHERE turn_id = %s ORDER BY step_num", (turn_id,)
        ).fetchall()

    def gc(self, now: float) -> int:
        """Delete expired rows in one statement (autocommit: one transaction)."""
        return self._db.execute("DELETE FROM scratchpad WHERE expires_at <= %s", (now,)).rowcount

    def close(self) -> None:
        """Close the connection."""
        self._db.close()


def _decoded(found: tuple | None) -> Any:
    """The content as the caller stored it: text and JSON decoded, binary as bytes."""
    if found is None:
        raise KeyError("no such row")
    kind, content = found
    return content if kind == "binary" else content.decode()
