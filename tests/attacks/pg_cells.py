"""Stored values of a PostgreSQL store as the attacker overwrites them: the tamper matrix's cells, and a value of
another type than its column's written the only way PostgreSQL allows, by altering the column's type first
(``ALTER TABLE ... ALTER COLUMN ... TYPE``, every other row's value converted). Mixed into ``PostgresAttacker``
(tests/attacks/postgres_attacker.py), whose ``_connection`` and ``schema`` it uses.

Statements take ``?`` placeholders, as the SQLite attacker's and the shared mixins' (bookkeeping.py) do.
"""

from __future__ import annotations

import psycopg

from tests.attacks.tamper_cells import Cell, epoch_targets

TABLES = ("chunks", "deletions", "epoch_keys", "epoch_reservations", "epoch_tombstones", "key_reservations",
          "key_tombstones", "meta", "owner_keys", "owners", "rows", "scratchvault_schema",
          "summaries")  # every table the tamper matrix targets
NUMERIC = ("smallint", "integer", "bigint", "real", "double precision", "numeric")
_HOLDS = {bytes: ("bytea",), str: ("text",), float: ("double precision", "real"), bool: ("boolean",),
          int: ("bigint", "integer", "smallint")}  # column types that store a Python value as it is
_TARGET = {bytes: "bytea", str: "text", float: "double precision", bool: "boolean", int: "bigint"}


def qmark(sql: str, params: tuple) -> tuple[str, tuple | None]:
    """A statement with ``?`` placeholders as psycopg takes it (``%s``; a literal ``%`` doubled)."""
    return (sql.replace("%", "%%").replace("?", "%s"), tuple(params)) if params else (sql, None)


class QmarkConnection:
    """A psycopg connection that runs the sqlite3-style statements of the shared helpers."""

    def __init__(self, connection: psycopg.Connection) -> None:
        self.raw = connection

    def execute(self, sql: str, params: tuple = ()) -> psycopg.Cursor:
        return self.raw.execute(*qmark(sql, params))

    def executemany(self, sql: str, rows: list[tuple]) -> psycopg.Cursor:
        cursor = self.raw.cursor()
        cursor.executemany(qmark(sql, (None,))[0], rows)
        return cursor


def column_type(connection: QmarkConnection, schema: str, table: str, column: str) -> str:
    return connection.execute("SELECT data_type FROM information_schema.columns WHERE table_schema = ? AND "
                              "table_name = ? AND column_name = ?", (schema, table, column)).fetchone()[0]


def type_for(value: object, current: str) -> str | None:
    """The type a column must be altered to so it stores ``value`` as it is; None when it already does."""
    kind = type(value)
    if kind is int and current in ("integer", "smallint") and not -(2**31) <= value < 2**31:
        return "bigint"
    if current in _HOLDS[kind]:
        return None
    return "numeric" if kind is int and not -(2**63) <= value < 2**63 else _TARGET[kind]


def converted(column: str, current: str, target: str) -> str:
    """How an altered column converts every other row's value (an attacker picks any conversion it likes)."""
    if target == "text":
        return f"{column}::text"
    if target == "bytea":
        return f"convert_to({column}::text, 'UTF8')"
    if target == "boolean":
        return f"{column}::text NOT IN ('', '0', 'false')"
    if current in NUMERIC:
        return f"{column}::{target}"
    return f"{column}::int::{target}" if current == "boolean" else f"length({column}::text)::{target}"


def distribution_column(connection: QmarkConnection, schema: str, table: str) -> str | None:
    """The column Citus distributes ``table`` by; None when it is not distributed or the database has no Citus."""
    if connection.execute("SELECT to_regclass('pg_catalog.pg_dist_partition')").fetchone()[0] is None:
        return None
    found = connection.execute("SELECT column_to_column_name(logicalrelid, partkey) FROM pg_dist_partition WHERE "
                               "logicalrelid = to_regclass(?) AND partkey IS NOT NULL", (f"{schema}.{table}",))
    row = found.fetchone()
    return None if row is None else row[0]


def move_rows(connection: QmarkConnection, schema: str, table: str, column: str, value: object, where: str,
              params: tuple) -> int:
    """Give the rows ``where`` finds ``value`` as their distribution column: Citus refuses to UPDATE that column (a
    row would change shards), so the rows are deleted and inserted again with it, as whoever holds the tables can."""
    columns = [name for (name,) in connection.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = ? AND table_name = ? "
        "ORDER BY ordinal_position", (schema, table)).fetchall()]
    found = connection.execute(f"SELECT {', '.join(columns)} FROM {table} WHERE {where}", params).fetchall()
    connection.execute(f"DELETE FROM {table} WHERE {where}", params)
    at = columns.index(column)
    connection.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                           [(*row[:at], value, *row[at + 1:]) for row in found])
    return len(found)


def put_value(connection: QmarkConnection, schema: str, table: str, column: str, value: object, where: str,
              params: tuple) -> int:
    """Store ``value`` in ``table.column`` of the rows ``where`` finds; how many rows changed. A value the column's
    type cannot hold (text in a bytea column, bytes in an integer one) is stored by altering the column's type,
    in one statement that converts the other rows' values and sets these rows' to ``value``. On Citus a table's
    distribution column is set by moving the rows (``move_rows``); its type cannot be altered there (0 changed)."""
    current = column_type(connection, schema, table, column)
    target = type_for(value, current)
    if column == distribution_column(connection, schema, table):
        return 0 if target is not None else move_rows(connection, schema, table, column, value, where, params)
    if target is None:
        return connection.execute(f"UPDATE {table} SET {column} = ? WHERE {where}", (value, *params)).rowcount
    count = connection.execute(f"SELECT count(*) FROM {table} WHERE {where}", params).fetchone()[0]
    statement, bound = qmark(f"ALTER TABLE {table} ALTER COLUMN {column} TYPE {target} USING CASE WHEN {where} "
                             f"THEN ?::{target} ELSE {converted(column, current, target)} END", (*params, value))
    psycopg.ClientCursor(connection.raw).execute(statement, bound)  # DDL takes no server-side parameters
    return count


class PgTamperCells:
    """The matrix's cells of one schema (needs the host's ``_connection`` and ``schema``)."""

    def cells(self, seq: int) -> list[Cell]:
        """Every stored value the tamper matrix targets: as the SQLite attacker's (tamper_cells.py), chunks keyed
        by (seq, idx), and the schema version. A table this helper does not know fails."""
        with self._connection() as connection:
            tables = tuple(sorted(name for (name,) in connection.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = ?", (self.schema,))))
            assert tables == TABLES, f"the schema's tables changed: extend the tamper matrix to {tables}"
            owner_tag = connection.execute("SELECT owner_tag FROM rows WHERE seq = ?", (seq,)).fetchone()[0]
            names = [name for (name,) in connection.execute("SELECT name FROM meta ORDER BY name")]
            versions = [v for (v,) in connection.execute("SELECT version FROM owner_keys WHERE owner_tag = ?",
                                                         (owner_tag,))]
            indexes = [i for (i,) in connection.execute("SELECT idx FROM chunks WHERE seq = ? ORDER BY idx", (seq,))]
            old_summary = connection.execute("SELECT 1 FROM summaries WHERE seq = ?", (seq,)).fetchall()
            targets = ([("rows", "row", "seq = ?", (seq,))]
                       + [("summaries", "row", "seq = ?", (seq,)) for _ in old_summary]
                       + [("chunks", f"chunk {i}", "seq = ? AND idx = ?", (seq, i)) for i in indexes]
                       + [("meta", name, "name = ?", (name,)) for name in names]
                       + [("owner_keys", f"v{v}", "owner_tag = ? AND version = ?", (owner_tag, v)) for v in versions]
                       + [("owners", "owner", "owner_tag = ?", (owner_tag,)),
                          ("deletions", "ledger", "owner_tag = ?", (owner_tag,)),
                          ("scratchvault_schema", "version", "true", ())]
                       + [(table, f"v{v}", "owner_tag = ? AND version = ?", (owner_tag, v))
                          for table in ("key_reservations", "key_tombstones") for (v,) in connection.execute(
                              f"SELECT version FROM {table} WHERE owner_tag = ?", (owner_tag,)).fetchall()]
                       + epoch_targets(connection))
            return [Cell(table, label, column, where, params) for table, label, where, params in targets
                    for (column,) in connection.execute(
                        "SELECT column_name FROM information_schema.columns WHERE table_schema = ? AND "
                        "table_name = ? ORDER BY ordinal_position", (self.schema, table)).fetchall()]

    def read_cell(self, cell: Cell) -> object:
        return self._all(f"SELECT {cell.column} FROM {cell.table} WHERE {cell.where}", *cell.params)[0][0]

    def write_cell(self, cell: Cell, value: object) -> int:
        """Overwrite one cell; returns how many rows changed, 0 when the table's constraints refuse it (a primary
        key onto an existing one: not a state an attacker can make)."""
        try:
            with self._connection() as connection:
                return put_value(connection, self.schema, cell.table, cell.column, value, cell.where, cell.params)
        except psycopg.errors.IntegrityError:
            return 0
