"""Deleting rows from the SQLite file: what a delete, gc and shred run inside their write transaction, and why each
part goes under the secure-delete mode it does (threat_model.md, "Deletion")."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from vault.errors import IntegrityError
from vault.storage.sql.session import ROW_TABLES
from vault.storage.sqlite.schema import CHUNK_SHIFT, MAX_CHUNKS, check_schema, valid_seq


def delete_seqs(connection: sqlite3.Connection, seqs: list[int]) -> None:
    """Delete rows with their summaries and chunks. Chunks in ``chunks`` go under secure_delete=FAST: their pages
    are not zeroed, and need not be, since their key goes with the row. Rows (with the summary and only chunk a row
    holds) and the summaries of older rows go under ON, which also zeroes pages and cells freed when the b-tree
    rebalances: FAST alone leaves copies of other rows' cells, wrapped keys included, in pages it frees
    (threat_model.md, "Deletion"). A trigger, index or constraint (planted by a writer of the file since it was
    opened) could keep or copy what is deleted: the schema must be exactly the vault's, and every row must go."""
    check_schema(connection, ROW_TABLES)
    ranges = [(seq << CHUNK_SHIFT, (seq << CHUNK_SHIFT) | (MAX_CHUNKS - 1)) for seq in seqs if valid_seq(seq)]
    with secure_delete_fast(connection):
        connection.executemany("DELETE FROM chunks WHERE pos BETWEEN ? AND ?", ranges)
    connection.executemany("DELETE FROM summaries WHERE seq = ?", [(seq,) for seq in seqs])
    if connection.executemany("DELETE FROM rows WHERE seq = ?", [(seq,) for seq in seqs]).rowcount != len(seqs):
        raise IntegrityError("a delete left rows it was asked to remove (the file was altered to keep them)")


@contextmanager
def secure_delete_fast(connection: sqlite3.Connection) -> Iterator[None]:
    """Writes inside the block leave the pages they free unzeroed (``secure_delete=FAST``), for data whose old copies
    are worthless without a destroyed key or hold no secret; ``ON``, the connection's mode, is restored after."""
    connection.execute("PRAGMA secure_delete = FAST")
    try:
        yield
    finally:
        connection.execute("PRAGMA secure_delete = ON")
