"""The attacker's handle on a SQLite store's file: the one place in the attack suites that knows its tables, their
columns and the chunk key ``seq << 20 | index``. It opens the file with sqlite3, as anyone who may write the data
directory can, and never uses the vault's code.

A row is addressed by its seq (``seq_of`` finds it from an id) and a part of it by name: a clear column of the
row (``id``, ``owner_tag``, ``turn_tag``, ``key_version``, ``expires_at``, ``size_bytes``, ``wrapped_key``,
``metadata``), its ``summary``, or ``chunk`` with an index. A summary, and a one-chunk row's chunk, are where the
row keeps them: its own ``summary`` and ``chunk`` columns, else (rows written before schema 6, chunks of larger
rows) the ``summaries`` and ``chunks`` tables. PostgreSQL's attacker (postgres_attacker.py) has the
same operations; what only SQL can express (indexes on ids) is marked as this file's own, and what is done to the
file as a file (pages, the WAL, copies) is sqlite_files.py.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path

from tests.attacks.bookkeeping import Bookkeeping
from tests.attacks.part_edits import COLUMNS, PartEdits, RowCopies, RowReads, SavedRow
from tests.attacks.sqlite_files import SqliteFiles
from tests.attacks.tamper_cells import TABLES, Cell, TamperCells  # noqa: F401 (re-exported)
from tests.storage.sqlite.layouts import legacy_file
from vault.storage.sqlite.schema import MAX_SEQ

SHIFT = 20  # a chunk's key is seq << SHIFT | index
INDEX_MASK = (1 << SHIFT) - 1


class SqliteAttacker(TamperCells, Bookkeeping, SqliteFiles, PartEdits, RowReads, RowCopies):
    """Reads and writes one vault file behind the vault's back; every write is committed at once."""

    LAYOUTS = ("new", "legacy")  # files made by this scratchvault, and before schema 3 (found by an index on ids)
    PAGE = 4096  # SQLite's page size, as the vault leaves it
    TABLES = TABLES
    LAST_SEQ = MAX_SEQ - 1  # the last seq a row can have (its chunks' keys fit a signed 64-bit integer)

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    @property
    def location(self) -> Path:
        """What ``Vault.open`` takes to open this vault."""
        return self.path

    @staticmethod
    def copy_tree(source: Path, target: Path) -> None:
        """A copy of directory ``source`` (the vaults' files in it) at ``target``."""
        shutil.copytree(source, target)

    @staticmethod
    def discard(under: Path | None = None) -> None:
        """Nothing to release: the files stay in pytest's temporary directories (PostgreSQL drops schemas)."""

    def prepare(self, layout: str) -> None:
        """Make the empty file of ``layout`` before a vault opens it (nothing to make for "new")."""
        assert layout in self.LAYOUTS, f"no layout {layout!r} for a SQLite file"
        if layout == "legacy":
            legacy_file(self.path)

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        with closing(sqlite3.connect(self.path)) as connection:
            yield connection
            connection.commit()

    def _all(self, sql: str, *params) -> list[tuple]:
        with self._connection() as connection:
            return connection.execute(sql, params).fetchall()

    def _where(self, seq: int, part: str, chunk: int | None) -> tuple[str, str, str, int]:
        """(table, column, key column, key) of one part of row ``seq``: a summary or chunk 0 in the row's own column
        when it holds one there."""
        if part in ("summary", "chunk") and chunk in (None, 0) and self._inline(seq, part):
            return "rows", part, "seq", seq
        if part == "summary":
            return "summaries", "sealed", "seq", seq
        if part == "chunk":
            return "chunks", "sealed", "pos", seq << SHIFT | chunk
        assert part in COLUMNS, f"no part {part!r} in a row"
        return "rows", part, "seq", seq

    def _inline(self, seq: int, part: str) -> bool:
        """Whether row ``seq`` keeps its ``summary`` or ``chunk`` in its own column."""
        return self._holds() and bool(self._all(f"SELECT 1 FROM rows WHERE seq = ? AND {part} IS NOT NULL", seq))

    def _holds(self) -> bool:
        """Whether the file's rows have the columns that hold a summary and chunk (not before schema 6)."""
        return "chunk" in {name for _, name, *_ in self._all("PRAGMA table_info(rows)")}

    def _held(self, column: str, otherwise: str) -> str:
        """``column`` of rows, or ``otherwise`` (an expression) in a file made before rows held it."""
        return column if self._holds() else otherwise

    # -- reading -----------------------------------------------------------------------------------------------
    def seq_of(self, row_id: str) -> int:
        """The seq of the row storing ``row_id``, as a reader of the file sees it (no index consulted)."""
        return self._all("SELECT seq FROM rows NOT INDEXED WHERE id = ?", bytes.fromhex(row_id))[0][0]

    def counts(self) -> tuple[int, int, int]:
        """How many rows, summaries and chunks the file holds (in rows and in their own tables)."""
        summary, chunk = self._held("summary", "NULL"), self._held("chunk", "NULL")
        return self._all(f"SELECT count(*), count({summary}) + (SELECT count(*) FROM summaries), "
                         f"count({chunk}) + (SELECT count(*) FROM chunks) FROM rows")[0]

    def row_ids(self) -> set[str]:
        """The id of every stored row, in hex."""
        return {bytes(row_id).hex() for (row_id,) in self._all("SELECT id FROM rows")}

    def read(self, seq: int, part: str, chunk: int | None = None) -> object:
        """One part of row ``seq`` as stored (None if absent)."""
        table, column, key, value = self._where(seq, part, chunk)
        found = self._all(f"SELECT {column} FROM {table} WHERE {key} = ?", value)
        return found[0][0] if found else None

    def chunks(self) -> dict[tuple[int, int], bytes]:
        """Every stored chunk, by (seq, index)."""
        held = self._held("chunk", "NULL")
        return {(pos >> SHIFT, pos & INDEX_MASK): sealed for pos, sealed in self._all(
            f"SELECT seq << {SHIFT}, {held} FROM rows WHERE {held} IS NOT NULL "
            "UNION ALL SELECT pos, sealed FROM chunks ORDER BY 1")}

    def chunk_indexes(self) -> dict[int, list[int]]:
        """The indexes of the chunks stored for each seq, in order (no sealed bytes read)."""
        found: dict[int, list[int]] = {}
        for (pos,) in self._all(f"SELECT seq << {SHIFT} FROM rows WHERE {self._held('chunk', 'NULL')} IS NOT NULL "
                                "UNION ALL SELECT pos FROM chunks ORDER BY 1"):
            found.setdefault(pos >> SHIFT, []).append(pos & INDEX_MASK)
        return found

    def row_parts(self, row_id: str) -> dict[str, bytes]:
        """The sealed parts of a row a reader of the files could look for: wrapped key, metadata, summary, chunk 0."""
        seq = self.seq_of(row_id)
        return {"wrapped_key": self.read(seq, "wrapped_key"), "metadata": self.read(seq, "metadata"),
                "summary": self.read(seq, "summary"), "first_chunk": self.read(seq, "chunk", 0)}

    def meta(self, name: str) -> object:
        """A vault-wide value (``vault_id``, ``index_key_check``), or None; None too when the file or its tables do
        not exist yet (read-only: a file that is not there is not created)."""
        if not self.path.exists():
            return None
        with closing(sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)) as connection:
            try:
                found = connection.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
            except sqlite3.OperationalError:  # no schema yet
                return None
        return None if found is None else found[0]

    def commitments(self) -> list[tuple[bytes, int, bytes]]:
        """(owner tag, version, commitment) of every recorded owner key, by owner and version; empty when the file
        or its tables do not exist yet (read-only)."""
        if not self.path.exists():
            return []
        with closing(sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)) as connection:
            try:
                return connection.execute("SELECT owner_tag, version, check_value FROM owner_keys "
                                          "ORDER BY owner_tag, version").fetchall()
            except sqlite3.OperationalError:  # no schema yet
                return []

    def key_versions(self) -> dict[int, int]:
        """How many rows each key version wraps."""
        return dict(self._all("SELECT key_version, count(*) FROM rows GROUP BY key_version"))

    def intact(self) -> bool:
        """SQLite's own integrity check of the file passes."""
        return self._all("PRAGMA integrity_check") == [("ok",)]

    # -- writing -----------------------------------------------------------------------------------------------
    def write(self, seq: int, part: str, value: object, chunk: int | None = None, *, as_text: bool = False) -> None:
        """Store ``value`` as one part of row ``seq`` (``as_text``: the bytes given, stored as TEXT)."""
        table, column, key, where = self._where(seq, part, chunk)
        placeholder = "CAST(? AS TEXT)" if as_text else "?"
        with self._connection() as connection:
            changed = connection.execute(f"UPDATE {table} SET {column} = {placeholder} WHERE {key} = ?",
                                         (value, where)).rowcount
        assert changed == 1, f"no {part} of row {seq} to overwrite"

    def remove(self, seq: int, part: str, chunk: int | None = None) -> None:
        """Delete one part of row ``seq``: ``row`` (its clear columns and what they hold: its summary and only chunk
        when kept there), ``summary``, or ``chunk`` ``index`` (set NULL when the row holds it)."""
        table, column, key, value = ("rows", None, "seq", seq) if part == "row" else self._where(seq, part, chunk)
        statement = (f"UPDATE rows SET {column} = NULL WHERE seq = ?" if table == "rows" and part != "row"
                     else f"DELETE FROM {table} WHERE {key} = ?")
        with self._connection() as connection:
            assert connection.execute(statement, (value,)).rowcount == 1

    def add_chunk(self, seq: int, index: int, sealed: bytes) -> None:
        """Store one more chunk for row ``seq`` (in the chunks table, as a larger row's)."""
        with self._connection() as connection:
            connection.execute("INSERT INTO chunks (pos, sealed) VALUES (?, ?)", (seq << SHIFT | index, sealed))

    def move_row(self, seq: int, to: int) -> None:
        """Move row ``seq`` with its summary and chunks to ``to`` (a seq no row uses)."""
        with self._connection() as connection:
            assert connection.execute("UPDATE rows SET seq = ? WHERE seq = ?", (to, seq)).rowcount == 1
            for sql in ("UPDATE summaries SET seq = ? WHERE seq = ?",  # none: the row holds its summary (and chunk)
                        f"UPDATE chunks SET pos = (? << {SHIFT}) | (pos & {INDEX_MASK}) WHERE pos >> {SHIFT} = ?"):
                connection.execute(sql, (to, seq))

    def shift_rows(self, by: int) -> None:
        """Move every row, with its summary and chunks, ``by`` seqs up."""
        with self._connection() as connection:
            connection.execute("UPDATE rows SET seq = seq + ?", (by,))
            connection.execute("UPDATE summaries SET seq = seq + ?", (by,))
            connection.execute(f"UPDATE chunks SET pos = pos + (? << {SHIFT})", (by,))

    def save_row(self, seq: int) -> SavedRow:
        """The attacker's copy of row ``seq``."""
        chunk = self._held("chunk", "NULL")
        chunks = self._all(f"SELECT 0, {chunk} FROM rows WHERE seq = ?1 AND {chunk} IS NOT NULL UNION ALL "
                           f"SELECT pos & {INDEX_MASK}, sealed FROM chunks WHERE pos >> {SHIFT} = ?1 ORDER BY 1", seq)
        return SavedRow(seq, self.row(seq), self.read(seq, "summary"), tuple(chunks))

    def insert_row(self, seq: int, columns: dict, summary: bytes, chunks: Iterable[tuple[int, bytes]]) -> None:
        """Insert a row made by hand: its clear columns, sealed summary and sealed chunks (index, sealed), laid out
        as the vault lays a new row out (summary in the row, and its chunk when it has one)."""
        assert set(columns) == set(COLUMNS), f"a row has the columns {COLUMNS}"
        chunks = list(chunks)
        only = chunks[0][1] if [index for index, _ in chunks] == [0] else None
        with self._connection() as connection:
            connection.execute(f"INSERT INTO rows (seq, {', '.join(columns)}, summary, chunk) "
                               f"VALUES (?, {', '.join('?' * len(columns))}, ?, ?)",
                               (seq, *columns.values(), summary, only))
            connection.executemany("INSERT INTO chunks (pos, sealed) VALUES (?, ?)",
                                   [(seq << SHIFT | index, sealed) for index, sealed in chunks if only is None])

    def restore_row(self, saved: SavedRow, **columns: object) -> None:
        """Write a saved row back at its old seq (its id names that seq), replacing any row with its id or seq."""
        row_id = columns.get("id", saved.columns["id"])
        with self._connection() as connection:
            for (old,) in connection.execute("SELECT seq FROM rows WHERE id = ? OR seq = ?",
                                             (row_id, saved.seq)).fetchall():
                connection.execute("DELETE FROM rows WHERE seq = ?", (old,))
                connection.execute("DELETE FROM summaries WHERE seq = ?", (old,))
                connection.execute(f"DELETE FROM chunks WHERE pos >> {SHIFT} = ?", (old,))
        self.write_row(saved, **columns)

    def hold(self, seq: int, part: str, value: bytes | None) -> None:
        """Set the ``summary`` or ``chunk`` column of row ``seq`` itself, wherever the row keeps that part."""
        assert part in ("summary", "chunk")
        with self._connection() as connection:
            assert connection.execute(f"UPDATE rows SET {part} = ? WHERE seq = ?", (value, seq)).rowcount == 1

    def plant_summary(self, seq: int, sealed: bytes) -> None:
        """Put a summary for row ``seq`` in the summaries table (where rows written before schema 6 keep theirs)."""
        with self._connection() as connection:
            connection.execute("INSERT OR REPLACE INTO summaries (seq, sealed) VALUES (?, ?)", (seq, sealed))

    def lay_out_as_before_inline(self, seq: int) -> None:
        """Move row ``seq``'s summary and only chunk out of the row into their tables, as a row written before
        schema 6 keeps them (what the upgrade leaves of every older row)."""
        with self._connection() as connection:
            connection.execute("INSERT INTO summaries (seq, sealed) SELECT seq, summary FROM rows WHERE seq = ? "
                               "AND summary IS NOT NULL", (seq,))
            connection.execute(f"INSERT INTO chunks (pos, sealed) SELECT seq << {SHIFT}, chunk FROM rows "
                               "WHERE seq = ? AND chunk IS NOT NULL", (seq,))
            connection.execute("UPDATE rows SET summary = NULL, chunk = NULL WHERE seq = ?", (seq,))

    def next_free_seq(self) -> int:
        """The seq after the last row's."""
        return self._all("SELECT coalesce(max(seq), 0) + 1 FROM rows")[0][0]

    def rewind_seq(self) -> None:
        """Nothing to do: the next put already takes the seq after the last stored row's (a deleted row's, if it
        was the last). PostgreSQL's attacker resets its sequence to the same end."""

    def forge_top_seq(self, seq: int, top: int) -> None:
        """Make ``top`` the last seq taken, so the next put takes ``top + 1``: a copy of row ``seq`` put there."""
        self.copy_row(seq, top)

    # -- this file's own: SQL (pages, the WAL and the file itself: sqlite_files.py) ------------------------------
    def run(self, *statements: str | tuple) -> None:
        """Run raw statements, each ``sql`` or ``(sql, *params)``, in one committed transaction (the cases only
        SQL can express: indexes on ids, a rebuilt table, a schema edited in place)."""
        with self._connection() as connection:
            for statement in statements:
                sql, *params = (statement,) if isinstance(statement, str) else statement
                connection.execute(sql, params)

    def query(self, sql: str, *params: object) -> list[tuple]:
        """Rows of a raw query (what an attacker reads back of what it planted)."""
        return self._all(sql, *params)
