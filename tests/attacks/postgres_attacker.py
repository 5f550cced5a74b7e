"""The attacker's handle on a PostgreSQL store: whoever holds the vault's tables (a DBA, the tables' owner, a
superuser) and reads and writes them with psycopg behind the vault's back, never through the vault's code. The same
operations as the SQLite attacker's (tests/attacks/sqlite_attacker.py), over the PostgreSQL schema: chunks keyed by
(owner_tag, seq, idx), not packed (a part planted for a row takes the row's owner tag, as the vault's own would); a
value of another type than its column's stored by altering the column (pg_cells.py).

The file's operations get their nearest honest equivalent: a copy of the file is a copy of the schema, putting it
back restores it, sequence included (pg_locations.py); a reader's snapshot is a REPEATABLE READ transaction; the
write lock is LOCK TABLE; the integrity check is amcheck's. Pages of the file (``pages``, ``garble_page``,
``truncate``) do not apply, as the server owns its files: the tests using them are marked ``sqlite_only``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

from tests.attacks import pg_locations
from tests.attacks.bookkeeping import Bookkeeping
from tests.attacks.part_edits import COLUMNS, PartEdits, RowCopies, RowReads, SavedRow
from tests.attacks.pg_cells import TABLES, PgTamperCells, QmarkConnection, put_value
from tests.attacks.pg_key_records import PgKeyRecords
from tests.attacks.pg_sessions import PgSessions

LAST_SEQ = 2**63 - 1  # the row sequence's last value (bigint)


def _hex(value: object) -> str:
    return value.encode().hex() if isinstance(value, str) else bytes(value).hex()


class PostgresAttacker(PgTamperCells, PgKeyRecords, Bookkeeping, PgSessions, PartEdits, RowReads, RowCopies):
    """Reads and writes one vault's schema behind the vault's back; every write is committed at once."""

    LAYOUTS = ("new",)  # no PostgreSQL store predates its first schema
    TABLES = TABLES
    LAST_SEQ = LAST_SEQ

    def __init__(self, location: str | Path) -> None:
        # what Vault.open takes (the app role's URL), the superuser's URL to the same schema, and the schema
        self.location, self.url, self.schema = pg_locations.resolve(location)

    def prepare(self, layout: str) -> None:
        """Make the empty store of ``layout`` before a vault opens it (nothing to make for "new")."""
        assert layout in self.LAYOUTS, f"no layout {layout!r} for a PostgreSQL store"

    copy_tree = staticmethod(pg_locations.copy_tree)
    discard = staticmethod(pg_locations.discard)

    @contextmanager
    def _connection(self) -> Iterator[QmarkConnection]:
        with pg_locations.connected(self.url, self.schema) as connection:  # commits when the block ends
            yield QmarkConnection(connection)

    def _all(self, sql: str, *params) -> list[tuple]:
        with self._connection() as connection:
            return connection.execute(sql, params).fetchall()

    def _where(self, seq: int, part: str, chunk: int | None) -> tuple[str, str, str, tuple]:
        """(table, column, condition, its parameters) of one part of row ``seq``: a summary or chunk 0 in the row's
        own column when it holds one there."""
        if part in ("summary", "chunk") and chunk in (None, 0) and self._inline(seq, part):
            return "rows", part, "seq = ?", (seq,)
        if part == "summary":
            return "summaries", "sealed", "seq = ?", (seq,)
        if part == "chunk":
            return "chunks", "sealed", "seq = ? AND idx = ?", (seq, chunk)
        assert part in COLUMNS, f"no part {part!r} in a row"
        return "rows", part, "seq = ?", (seq,)

    def _inline(self, seq: int, part: str) -> bool:
        """Whether row ``seq`` keeps its ``summary`` or ``chunk`` in its own column."""
        return bool(self._all(f"SELECT 1 FROM rows WHERE seq = ? AND {part} IS NOT NULL", seq))

    # -- reading -----------------------------------------------------------------------------------------------
    def seq_of(self, row_id: str) -> int:
        """The seq of the row storing ``row_id`` (a scan: there is no index on ids)."""
        return self._all("SELECT seq FROM rows WHERE id = ?", bytes.fromhex(row_id))[0][0]

    def counts(self) -> tuple[int, int, int]:
        """How many rows, summaries and chunks the schema holds (in rows and in their own tables; a statement a
        table, as Citus runs no subquery of another distributed table in a select list)."""
        rows, summaries, chunks = self._all("SELECT count(*), count(summary), count(chunk) FROM rows")[0]
        return (rows, summaries + self._all("SELECT count(*) FROM summaries")[0][0],
                chunks + self._all("SELECT count(*) FROM chunks")[0][0])

    def _owner_of(self, seq: int) -> bytes:
        """The owner tag of row ``seq``, the one a part planted for it is stored under (empty when no row has it),
        read first: Citus routes an insert by the value it is given, never by a subquery's."""
        found = self._all("SELECT owner_tag FROM rows WHERE seq = ?", seq)
        return bytes(found[0][0]) if found else b""

    def row_ids(self) -> set[str]:
        return {_hex(row_id) for (row_id,) in self._all("SELECT id FROM rows")}

    def read(self, seq: int, part: str, chunk: int | None = None) -> object:
        table, column, where, params = self._where(seq, part, chunk)
        found = self._all(f"SELECT {column} FROM {table} WHERE {where}", *params)
        return found[0][0] if found else None

    def chunks(self) -> dict[tuple[int, int], bytes]:
        return {(seq, idx): sealed for seq, idx, sealed in self._all(
            "SELECT seq, 0, chunk FROM rows WHERE chunk IS NOT NULL UNION ALL SELECT seq, idx, sealed FROM chunks")}

    def chunk_indexes(self) -> dict[int, list[int]]:
        found: dict[int, list[int]] = {}
        for seq, idx in self._all("SELECT seq, 0 FROM rows WHERE chunk IS NOT NULL UNION ALL "
                                  "SELECT seq, idx FROM chunks ORDER BY 1, 2"):
            found.setdefault(seq, []).append(idx)
        return found

    def row_parts(self, row_id: str) -> dict[str, bytes]:
        seq = self.seq_of(row_id)
        return {"wrapped_key": self.read(seq, "wrapped_key"), "metadata": self.read(seq, "metadata"),
                "summary": self.read(seq, "summary"), "first_chunk": self.read(seq, "chunk", 0)}

    def _made(self, table: str) -> bool:
        """Whether the vault has made ``table`` yet."""
        return self._all("SELECT to_regclass(?)", f"{self.schema}.{table}")[0][0] is not None

    def intact(self) -> bool:
        """amcheck finds every table's heap and every index of the schema sound."""
        with psycopg.connect(self.url, autocommit=True) as connection:
            connection.execute("CREATE EXTENSION IF NOT EXISTS amcheck SCHEMA public")
            tables = connection.execute("SELECT c.oid, c.relkind FROM pg_class c JOIN pg_namespace n ON "
                                        "n.oid = c.relnamespace WHERE n.nspname = %s AND (c.relkind = 'r' OR "
                                        "c.relkind = 'i' AND c.relam = (SELECT oid FROM pg_am WHERE amname = "
                                        "'btree'))",  # amcheck checks B-trees (and heaps) only
                                        (self.schema,)).fetchall()
            for oid, kind in tables:
                if kind == "i":
                    connection.execute("SELECT public.bt_index_check(%s::regclass, true)", (oid,))
                elif connection.execute("SELECT count(*) FROM public.verify_heapam(%s::regclass)",
                                        (oid,)).fetchone()[0]:
                    return False
        return True

    # -- writing -----------------------------------------------------------------------------------------------
    def write(self, seq: int, part: str, value: object, chunk: int | None = None, *, as_text: bool = False) -> None:
        """Store ``value`` as one part of row ``seq`` (``as_text``: the bytes given, in a column altered to text)."""
        table, column, where, params = self._where(seq, part, chunk)
        if as_text:
            value = value.decode("latin-1") if isinstance(value, bytes) else str(value)
        with self._connection() as connection:
            changed = put_value(connection, self.schema, table, column, value, where, params)
        assert changed == 1, f"no {part} of row {seq} to overwrite"

    def remove(self, seq: int, part: str, chunk: int | None = None) -> None:
        """Delete one part of row ``seq``: ``row`` (its clear columns and what they hold: its summary and only chunk
        when kept there), ``summary``, or ``chunk`` ``index`` (set NULL when the row holds it)."""
        table, column, where, params = (("rows", None, "seq = ?", (seq,)) if part == "row"
                                        else self._where(seq, part, chunk))
        statement = (f"UPDATE rows SET {column} = NULL WHERE {where}" if table == "rows" and part != "row"
                     else f"DELETE FROM {table} WHERE {where}")
        with self._connection() as connection:
            assert connection.execute(statement, params).rowcount == 1

    def add_chunk(self, seq: int, index: int, sealed: bytes) -> None:
        self.run(("INSERT INTO chunks (owner_tag, seq, idx, sealed) VALUES (?, ?, ?, ?)", self._owner_of(seq), seq,
                  index, sealed))

    def move_row(self, seq: int, to: int) -> None:
        """Move row ``seq`` with its summary and chunks to ``to`` (a seq no row uses)."""
        with self._connection() as connection:
            assert connection.execute("UPDATE rows SET seq = ? WHERE seq = ?", (to, seq)).rowcount == 1
            for table in ("summaries", "chunks"):  # none: the row holds its summary (and chunk)
                connection.execute(f"UPDATE {table} SET seq = ? WHERE seq = ?", (to, seq))

    def shift_rows(self, by: int) -> None:
        self.run(*((f"UPDATE {table} SET seq = seq + ?", by) for table in ("rows", "summaries", "chunks")))

    def save_row(self, seq: int) -> SavedRow:
        chunks = self._all("SELECT 0, chunk FROM rows WHERE seq = ? AND chunk IS NOT NULL UNION ALL "
                           "SELECT idx, sealed FROM chunks WHERE seq = ? ORDER BY 1", seq, seq)
        return SavedRow(seq, self.row(seq), self.read(seq, "summary"), tuple(chunks))

    def insert_row(self, seq: int, columns: dict, summary: bytes, chunks: Iterable[tuple[int, bytes]]) -> None:
        """Insert a row made by hand, laid out as the vault lays a new row out (summary in the row, and its chunk
        when it has one)."""
        assert set(columns) == set(COLUMNS), f"a row has the columns {COLUMNS}"
        chunks = list(chunks)
        only = chunks[0][1] if [index for index, _ in chunks] == [0] else None
        with self._connection() as connection:
            connection.execute(f"INSERT INTO rows (seq, {', '.join(columns)}, summary, chunk) "
                               f"VALUES (?, {', '.join('?' * len(columns))}, ?, ?)",
                               (seq, *columns.values(), summary, only))
            connection.executemany("INSERT INTO chunks (owner_tag, seq, idx, sealed) VALUES (?, ?, ?, ?)",
                                   [(columns["owner_tag"], seq, index, sealed) for index, sealed in chunks
                                    if only is None])

    def restore_row(self, saved: SavedRow, **columns: object) -> None:
        """Write a saved row back at its old seq, replacing any row with its id or seq."""
        row_id = columns.get("id", saved.columns["id"])
        with self._connection() as connection:
            for (old,) in connection.execute("SELECT seq FROM rows WHERE id = ? OR seq = ?",
                                             (row_id, saved.seq)).fetchall():
                for table in ("rows", "summaries", "chunks"):
                    connection.execute(f"DELETE FROM {table} WHERE seq = ?", (old,))
        self.write_row(saved, **columns)

    def hold(self, seq: int, part: str, value: bytes | None) -> None:
        """Set the ``summary`` or ``chunk`` column of row ``seq`` itself, wherever the row keeps that part."""
        assert part in ("summary", "chunk")
        with self._connection() as connection:
            assert connection.execute(f"UPDATE rows SET {part} = ? WHERE seq = ?", (value, seq)).rowcount == 1

    def plant_summary(self, seq: int, sealed: bytes) -> None:
        """Put a summary for row ``seq`` in the summaries table (where rows written before schema 3 keep theirs)."""
        self.run(("INSERT INTO summaries (owner_tag, seq, sealed) VALUES (?, ?, ?) ON CONFLICT (owner_tag, seq) "
                  "DO UPDATE SET sealed = excluded.sealed", self._owner_of(seq), seq, sealed))

    def lay_out_as_before_inline(self, seq: int) -> None:
        """Move row ``seq``'s summary and only chunk out of the row into their tables, as a row written before
        schema 3 keeps them (what the upgrade leaves of every older row)."""
        self.run(("INSERT INTO summaries (owner_tag, seq, sealed) SELECT owner_tag, seq, summary FROM rows "
                  "WHERE seq = ? AND summary IS NOT NULL", seq),
                 ("INSERT INTO chunks (owner_tag, seq, idx, sealed) SELECT owner_tag, seq, 0, chunk FROM rows "
                  "WHERE seq = ? AND chunk IS NOT NULL", seq),
                 ("UPDATE rows SET summary = NULL, chunk = NULL WHERE seq = ?", seq))

    def next_free_seq(self) -> int:
        return self._all("SELECT coalesce(max(seq), 0) + 1 FROM rows")[0][0]

    def rewind_seq(self) -> None:
        """Set the row sequence back so the next put takes the seq after the last stored row's (a deleted row's,
        if it was the last): PostgreSQL never reuses a seq unless someone resets the sequence (setval)."""
        self.run("SELECT setval('row_seq', coalesce((SELECT max(seq) FROM rows), 0) + 1, false)")

    def forge_top_seq(self, seq: int, top: int) -> None:
        """Make ``top`` the last seq taken, so the next put takes ``top + 1`` (the sequence set forward)."""
        self.run(("SELECT setval('row_seq', ?)", top))

    # -- SQL, and the nearest equivalents of the file's operations ---------------------------------------------
    def run(self, *statements: str | tuple) -> None:
        """Raw statements, each ``sql`` or ``(sql, *params)`` with ``?`` placeholders, in one committed
        transaction (triggers, rules, altered tables: what only SQL can express)."""
        with self._connection() as connection:
            for statement in statements:
                sql, *params = (statement,) if isinstance(statement, str) else statement
                connection.execute(sql, tuple(params))

    def query(self, sql: str, *params: object) -> list[tuple]:
        return self._all(sql, *params)

    def copy_file(self, target: Path) -> None:
        """A copy of every table and the sequence (a backup), kept in the schema of ``target``."""
        pg_locations.copy_schema(self.schema, pg_locations.resolve(target)[2])

    def put_back_file(self, source: Path) -> None:
        """The vault's schema replaced by an older copy (``copy_file``), its sequence put back with it."""
        pg_locations.copy_schema(pg_locations.resolve(source)[2], self.schema)

    def checkpoint(self) -> bool:
        """CHECKPOINT, and whether no other session of the database is left inside a transaction (what a
        checkpoint that completes shows of the SQLite file: no reader holds an old snapshot)."""
        with psycopg.connect(self.url, autocommit=True) as connection:
            connection.execute("CHECKPOINT")
            return not connection.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                                          "AND pid <> pg_backend_pid() AND xact_start IS NOT NULL").fetchone()[0]

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Hold a read snapshot (another host's reader) for the block."""
        with psycopg.connect(self.url, autocommit=True) as reader:
            reader.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            reader.execute("SELECT count(*) FROM rows").fetchone()
            try:
                yield
            finally:
                reader.execute("ROLLBACK")

    @contextmanager
    def holding_the_write_lock(self) -> Iterator[None]:
        """Hold a lock that stops every write to the rows (another host's LOCK TABLE) until the block ends."""
        with psycopg.connect(self.url, autocommit=True) as writer:
            writer.execute("BEGIN")
            writer.execute("LOCK TABLE rows, summaries, chunks IN EXCLUSIVE MODE")
            try:
                yield
            finally:
                writer.execute("COMMIT")
