"""What a PostgreSQL server leaves on disk, read the way a thief with the data directory (or a backup of it) reads
it: a relation's files (every segment of the table, its TOAST table and indexes) and the WAL, searched for canaries.

Canaries share a random tag so one scan finds them all: the scan looks for the tag with ``bytes.find`` and checks the
bytes after it against the canary set (searching each of 1,000 canaries through gigabytes of WAL would take minutes).
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import psycopg

TAG_BYTES = 8


@dataclass
class Canaries:
    """Random byte strings of one length, all starting with the same random tag."""

    size: int
    tag: bytes = field(default_factory=lambda: secrets.token_bytes(TAG_BYTES))

    def new(self) -> bytes:
        return self.tag + secrets.token_bytes(self.size - TAG_BYTES)

    def found_in(self, paths: Iterable[Path], wanted: set[bytes]) -> set[bytes]:
        """The canaries of ``wanted`` that occur whole in any of the files."""
        found: set[bytes] = set()
        for path in paths:
            data = path.read_bytes()
            at = data.find(self.tag)
            while at != -1:
                candidate = data[at:at + self.size]
                if candidate in wanted:
                    found.add(candidate)
                at = data.find(self.tag, at + 1)
        return found


def data_directory(admin: psycopg.Connection) -> Path:
    """The server's data directory (a superuser may ask), checked readable by this process: scanning it needs
    root or the cluster's own account."""
    directory = Path(admin.execute("SHOW data_directory").fetchone()[0])
    os.listdir(directory / "base")  # PermissionError when this process may not read it
    return directory


def relation_files(connection: psycopg.Connection, datadir: Path, relation: str) -> list[Path]:
    """Every segment file of the main fork of ``relation``, its TOAST table, the TOAST index and its indexes, as
    the server maps them now (VACUUM FULL gives them new files)."""
    oids = connection.execute(
        "SELECT c.oid FROM pg_class c WHERE c.oid = %(rel)s::regclass"
        " OR c.oid = (SELECT reltoastrelid FROM pg_class WHERE oid = %(rel)s::regclass)"
        " OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = %(rel)s::regclass"
        "   OR indrelid = (SELECT reltoastrelid FROM pg_class WHERE oid = %(rel)s::regclass))",
        {"rel": relation}).fetchall()
    files: list[Path] = []
    for (oid,) in oids:
        (main,) = connection.execute("SELECT pg_relation_filepath(%s)", [oid]).fetchone()
        files.extend(segments(datadir / main))
    return files


def segments(main: Path) -> list[Path]:
    """``main`` and its further 1 GiB segments (``main.1``, ``main.2``, ...)."""
    pattern = re.compile(re.escape(main.name) + r"(\.\d+)?")
    return [main.parent / name for name in sorted(os.listdir(main.parent)) if pattern.fullmatch(name)]


def wal_files(datadir: Path) -> list[Path]:
    """Every WAL segment in ``pg_wal``, the recycled ones included (they keep their old contents until reused)."""
    return sorted(path for path in (datadir / "pg_wal").iterdir() if path.is_file())
