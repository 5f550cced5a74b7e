"""Faults of the SQLite driver that a test cannot provoke on demand (a COMMIT failing as a full disk makes it
fail), as stand-ins for the store's connection: the one place outside the attacker that raises sqlite3's errors."""

from __future__ import annotations

import sqlite3

from tests.support.fault_counts import FaultDouble


class ScriptedConnection(FaultDouble):
    """A connection recording what the transaction did; with ``commit_fails`` its COMMIT fails as a full disk
    makes it fail (counted)."""

    def __init__(self, *, commit_fails: bool) -> None:
        self.in_transaction = False
        self.statements: list[str] = []
        if commit_fails:
            self.arm()

    def execute(self, sql: str, parameters: tuple = ()) -> None:
        self.statements.append(sql)
        if sql == "BEGIN IMMEDIATE":
            self.in_transaction = True
        elif sql == "COMMIT" and self.armed():
            self.failed()
            raise sqlite3.OperationalError("database or disk is full")

    def rollback(self) -> None:
        self.statements.append("ROLLBACK")
        self.in_transaction = False


class OneConnection:
    """Connections handing out one connection, counting uses."""

    def __init__(self, connection: ScriptedConnection) -> None:
        self.connection, self.uses = connection, 0

    def acquire(self) -> ScriptedConnection:
        self.uses += 1
        return self.connection

    def release(self, connection: ScriptedConnection) -> None:
        self.uses -= 1
