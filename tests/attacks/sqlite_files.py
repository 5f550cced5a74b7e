"""What an attacker does to a SQLite store's file as a file: pages garbled, the file cut short, copied and put
back, its WAL checkpointed, a reader's snapshot or the write lock held from another process. Mixed into
``SqliteAttacker`` (tests/attacks/sqlite_attacker.py), whose ``path`` it uses."""

from __future__ import annotations

import random
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path


class SqliteFiles:
    """The file's own operations (needs the host's ``path``, ``PAGE`` and ``_connection``)."""

    def pages(self) -> int:
        """How many whole pages the file has."""
        return self.path.stat().st_size // self.PAGE

    def garble_page(self, page: int, rng: random.Random) -> None:
        """Overwrite one page of the file with random bytes."""
        with open(self.path, "r+b") as file:
            file.seek(page * self.PAGE)
            file.write(rng.randbytes(self.PAGE))

    def truncate(self, size: int) -> None:
        """Cut the file to ``size`` bytes."""
        with open(self.path, "r+b") as file:
            file.truncate(size)

    def copy_file(self, target: Path) -> None:
        """A copy of the whole database file (the vault closed, so nothing is left in the WAL)."""
        shutil.copy(self.path, target)

    def put_back_file(self, source: Path) -> None:
        """Replace the whole database file with an older copy."""
        shutil.copy(source, self.path)

    def checkpoint(self) -> bool:
        """Try to checkpoint the WAL into the file and truncate it; whether that completed."""
        with self._connection() as connection:
            return connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Hold a read snapshot of the file (another process's reader) for the block."""
        with closing(sqlite3.connect(self.path)) as reader:
            reader.execute("BEGIN")
            reader.execute("SELECT count(*) FROM rows").fetchone()  # the snapshot starts with a read
            try:
                yield
            finally:
                reader.rollback()

    @contextmanager
    def holding_the_write_lock(self) -> Iterator[None]:
        """Hold the file's write lock (another process's write transaction) until the block ends."""
        with closing(sqlite3.connect(self.path, isolation_level=None)) as writer:
            writer.execute("BEGIN IMMEDIATE")
            try:
                yield
            finally:
                writer.execute("COMMIT")

    def settle(self) -> None:
        """Nothing to wait for: a SQLite file is final the moment its writer dies (PgSessions.settle)."""
