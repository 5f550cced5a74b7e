"""The plaintext baseline: a store shaped like the reference module (one table, content in one column).

WAL and ``synchronous=FULL`` like the vault; text is stored as TEXT so ``substr`` slices characters, binary as
a BLOB; no encryption, no owner, no secure delete. It exists only to be measured against.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

_SCHEMA = """
CREATE TABLE IF NOT EXISTS scratchpad (
    id TEXT PRIMARY KEY, turn_id TEXT NOT NULL, step_num INTEGER NOT NULL, executor_name TEXT NOT NULL,
    content_kind TEXT NOT NULL, content BLOB NOT NULL, size_bytes INTEGER NOT NULL, summary TEXT NOT NULL,
    created_at REAL NOT NULL, expires_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS scratchpad_turn ON scratchpad (turn_id);
CREATE INDEX IF NOT EXISTS scratchpad_expiry ON scratchpad (expires_at);
"""


class PlainStore:
    """The reference module's storage, reduced to what the benchmark exercises."""

    def __init__(self, path: Path) -> None:
        self._db = sqlite3.connect(path, isolation_level=None)
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute("PRAGMA synchronous = FULL")
        self._db.executescript(_SCHEMA)

    def put(self, turn_id: str, step_num: int, executor_name: str, observation: Any, ttl: float = 3600,
            now: float | None = None) -> str:
        """Store an observation in one row; returns its id."""
        created = time.time() if now is None else now
        content: str | bytes
        if isinstance(observation, str):
            kind, content, size = "text", observation, len(observation.encode())
            summary = observation[:240] + " … " + observation[-240:]
        elif isinstance(observation, bytes):
            kind, content, size = "binary", observation, len(observation)
            summary = f"binary, {size} bytes, sha256 {hashlib.sha256(observation).hexdigest()[:16]}"
        else:
            kind, content = "json", json.dumps(observation, ensure_ascii=False)
            size, summary = len(content.encode()), f"json, {len(observation)} items"
        row_id = os.urandom(16).hex()
        self._db.execute("BEGIN IMMEDIATE")
        self._db.execute(
            "INSERT INTO scratchpad VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (row_id, turn_id, step_num, executor_name, kind, content, size, summary, created, created + ttl),
        )
        self._db.execute("COMMIT")
        return row_id

    def read(self, row_id: str, start: int, length: int) -> Any:
        """``substr`` of the content: characters for TEXT, bytes for BLOB (SQLite's own semantics)."""
        return self._db.execute(
            "SELECT substr(content, ?, ?) FROM scratchpad WHERE id = ?", (start + 1, length, row_id)
        ).fetchone()[0]

    def tail(self, row_id: str, length: int) -> Any:
        """The last ``length`` units (a negative ``substr`` start counts from the end)."""
        return self._db.execute(
            "SELECT substr(content, ?, ?) FROM scratchpad WHERE id = ?", (-length, length, row_id)
        ).fetchone()[0]

    def get(self, row_id: str) -> Any:
        """The whole content."""
        return self._db.execute("SELECT content FROM scratchpad WHERE id = ?", (row_id,)).fetchone()[0]

    def list_for_turn(self, turn_id: str) -> list[tuple]:
        """Metadata and summaries of a turn, by step number."""
        return self._db.execute(
            "SELECT id, step_num, executor_name, content_kind, size_bytes, summary FROM scratchpad "
            "WHERE turn_id = ? ORDER BY step_num", (turn_id,)
        ).fetchall()

    def gc(self, now: float) -> int:
        """Delete expired rows (no secure delete, like the reference module)."""
        self._db.execute("BEGIN IMMEDIATE")
        removed = self._db.execute("DELETE FROM scratchpad WHERE expires_at <= ?", (now,)).rowcount
        self._db.execute("COMMIT")
        return removed

    def close(self) -> None:
        """Close the connection."""
        self._db.close()
