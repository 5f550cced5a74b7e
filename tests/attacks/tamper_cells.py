"""The tamper matrix's targets in a SQLite store's file: every stored value of a row, its summary and chunks, the meta
entries and the row owner's key bookkeeping and ledger, as cells an attacker reads and overwrites one at a time.
Mixed into ``SqliteAttacker`` (tests/attacks/sqlite_attacker.py), whose ``_connection`` and ``_all`` it uses."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

SHIFT = 20  # a chunk's key is seq << SHIFT | index
INDEX_MASK = (1 << SHIFT) - 1
TABLES = ("chunks", "deletions", "epoch_keys", "epoch_reservations", "epoch_tombstones", "key_reservations",
          "key_tombstones", "meta", "owner_keys", "owners", "rows", "summaries")  # every table the matrix targets
EPOCH_ROWS = (("epoch_keys", "SELECT length, epoch FROM epoch_keys", "length = ? AND epoch = ?"),
              ("epoch_reservations", "SELECT length, epoch, attempt FROM epoch_reservations",
               "length = ? AND epoch = ? AND attempt = ?"),
              ("epoch_tombstones", "SELECT length, epoch, attempt FROM epoch_tombstones",
               "length = ? AND epoch = ? AND attempt = ?"))


def epoch_targets(connection) -> list[tuple[str, str, str, tuple]]:
    """Every row of the epoch tables (shared by every owner): (table, label, where, params)."""
    return [(table, ".".join(map(str, key)), where, tuple(key)) for table, select, where in EPOCH_ROWS
            for key in connection.execute(select).fetchall()]


@dataclass(frozen=True)
class Cell:
    """One stored value: ``table[label].column``, found by ``where`` with ``params``."""

    table: str
    label: str
    column: str
    where: str
    params: tuple


class TamperCells:
    """The matrix's cells of one file (needs the host's ``_connection`` and ``_all``)."""

    def cells(self, seq: int) -> list[Cell]:
        """Every stored value the tamper matrix targets: each column of row ``seq`` (its summary and only chunk
        among them when the row holds them), its summary and each of its chunks kept in their tables, each ``meta``
        entry, the row owner's ``owner_keys``, ``owners``, ``deletions`` (ledger), ``key_reservations`` and
        ``key_tombstones`` entries, and every row of the epoch tables. A table this helper does not know fails: a
        new table cannot go untested."""
        with self._connection() as connection:
            tables = tuple(sorted(name for (name,) in connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")))
            assert tables == TABLES, f"the schema's tables changed: extend the tamper matrix to {tables}"
            owner_tag = connection.execute("SELECT owner_tag FROM rows WHERE seq = ?", (seq,)).fetchone()[0]
            names = [name for (name,) in connection.execute("SELECT name FROM meta ORDER BY name")]
            versions = [v for (v,) in connection.execute("SELECT version FROM owner_keys WHERE owner_tag = ?",
                                                         (owner_tag,))]
            positions = [pos for (pos,) in connection.execute(
                f"SELECT pos FROM chunks WHERE pos >> {SHIFT} = ? ORDER BY pos", (seq,))]
            old_summary = connection.execute("SELECT 1 FROM summaries WHERE seq = ?", (seq,)).fetchall()
            targets = ([("rows", "row", "seq = ?", (seq,))]
                       + [("summaries", "row", "seq = ?", (seq,)) for _ in old_summary]
                       + [("chunks", f"chunk {pos & INDEX_MASK}", "pos = ?", (pos,)) for pos in positions]
                       + [("meta", name, "name = ?", (name,)) for name in names]
                       + [("owner_keys", f"v{v}", "owner_tag = ? AND version = ?", (owner_tag, v)) for v in versions]
                       + [("owners", "owner", "owner_tag = ?", (owner_tag,)),
                          ("deletions", "ledger", "owner_tag = ?", (owner_tag,))]
                       + [(table, f"v{v}", "owner_tag = ? AND version = ?", (owner_tag, v))
                          for table in ("key_reservations", "key_tombstones") for (v,) in connection.execute(
                              f"SELECT version FROM {table} WHERE owner_tag = ?", (owner_tag,))]
                       + epoch_targets(connection))
            return [Cell(table, label, column, where, params) for table, label, where, params in targets
                    for _, column, *_ in connection.execute(f"PRAGMA table_info({table})")]

    def read_cell(self, cell: Cell) -> object:
        return self._all(f"SELECT {cell.column} FROM {cell.table} WHERE {cell.where}", *cell.params)[0][0]

    def write_cell(self, cell: Cell, value: object) -> int:
        """Overwrite one cell; returns how many rows changed, 0 when the file's constraints refuse it (e.g. a
        primary key onto an existing one: not a state an attacker can make)."""
        try:
            with self._connection() as connection:
                return connection.execute(f"UPDATE {cell.table} SET {cell.column} = ? WHERE {cell.where}",
                                          (value, *cell.params)).rowcount
        except sqlite3.IntegrityError:
            return 0
