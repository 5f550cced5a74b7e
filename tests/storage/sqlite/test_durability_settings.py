"""Every read-write connection the SQLite store opens commits with the settings threat_model.md and the README
promise: WAL, ``synchronous`` FULL or EXTRA (a returned put survives power loss) and ``secure_delete`` ON (a
deleted row's pages are zeroed). The settings are read on the connection itself at each COMMIT and at each
delete of a row or summary, on every thread, through every public operation that writes."""

from __future__ import annotations

import io
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from keys.testing import MemoryKeyring
from tests.support.clock import FakeClock
from vault import Principal, Vault, storage

ALICE, BOB = Principal("alice"), Principal("bob")
WAL, FULL, EXTRA, SECURE_DELETE_ON = "wal", 2, 3, 1


class Observed:
    """What the checking connections saw: one entry per checked statement, and the connections made."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        self.settings: list[tuple[str, str, int, int]] = []
        self.connections = 0


OBSERVED = Observed()


class Checked(sqlite3.Connection):
    """A connection that reads its own durability settings before each COMMIT and each row or summary delete."""

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        self._check(sql)
        return super().execute(sql, *args)

    def executemany(self, sql: str, *args: Any) -> sqlite3.Cursor:
        self._check(sql)
        return super().executemany(sql, *args)

    def _check(self, sql: str) -> None:
        statement = sql.strip().upper().split(" WHERE")[0]
        if statement.startswith("COMMIT") or statement in ("DELETE FROM ROWS", "DELETE FROM SUMMARIES"):
            read = super().execute
            found = (statement, read("PRAGMA journal_mode").fetchone()[0].lower(),
                     read("PRAGMA synchronous").fetchone()[0], read("PRAGMA secure_delete").fetchone()[0])
            with OBSERVED.lock:
                OBSERVED.settings.append(found)


@pytest.fixture
def observed(monkeypatch: pytest.MonkeyPatch) -> Observed:
    """Every read-write connection the store makes is a ``Checked`` one."""
    real = sqlite3.connect
    OBSERVED.reset()

    def connect(database: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        if "mode=rw" in str(database):
            with OBSERVED.lock:
                OBSERVED.connections += 1
            kwargs["factory"] = Checked
        return real(database, *args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", connect)
    return OBSERVED


def every_write(vault: Vault, clock: FakeClock) -> None:
    """Each public operation that writes, some from a second thread (a connection of its own)."""
    kept = vault.put(ALICE, "t", 1, "x", "kept " * 3000).id
    gone = vault.put(ALICE, "t", 2, "x", io.BytesIO(b"streamed " * 20000)).id
    worker = threading.Thread(target=lambda: vault.put(BOB, "t", 1, "x", "from another thread"))
    worker.start()
    worker.join()
    vault.delete(ALICE, gone)
    vault.extend_turn(ALICE, "t", 7200)
    vault.rotate_owner_key("alice")
    vault.rewrap("alice")
    vault.retire_old_key_versions("alice")
    vault.put(BOB, "u", 1, "x", "short-lived", ttl_seconds=60)
    clock.advance(120)
    vault.gc()
    vault.shred_owner("bob")
    assert vault.get(ALICE, kept).content.startswith("kept")


def test_every_connection_commits_and_deletes_with_wal_synchronous_full_and_secure_delete(
        observed: Observed, tmp_path: Path, clock: FakeClock) -> None:
    with Vault.open(tmp_path / "v.db", keyring_backend=MemoryKeyring(), clock=clock) as vault:
        every_write(vault, clock)
    assert observed.connections >= 2, "the second thread's connection was not seen"
    statements = {statement for statement, *_ in observed.settings}
    assert {"COMMIT", "DELETE FROM ROWS", "DELETE FROM SUMMARIES"} <= statements
    weak = [found for found in observed.settings
            if found[1] != WAL or found[2] not in (FULL, EXTRA) or found[3] != SECURE_DELETE_ON]
    assert weak == [], "statement, journal_mode, synchronous, secure_delete"


def test_doctor_reports_the_durability_settings_the_stores_connections_run_with(tmp_path: Path) -> None:
    location = tmp_path / "v.db"
    with Vault.open(location, keyring_backend=MemoryKeyring()) as vault:
        vault.put(ALICE, "t", 1, "x", "durable")
    found = [finding for finding in storage.describe(location) if finding.text.startswith("journal_mode")]
    assert [(f.status, f.text) for f in found] == [("ok", "journal_mode wal, synchronous FULL, secure_delete ON")]
