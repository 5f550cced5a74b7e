"""The tamper matrix: every column of every table, read from the schema itself, flipped at its start, middle and
end, cut short, cut to nothing, extended, nudged (numbers) and given the wrong type.

Targets are the big three-chunk row of test_tamper.py's world (its ``rows``, ``summaries`` and every
``chunks`` entry), every ``meta`` entry and the owner's ``owner_keys`` entry; a table the matrix does not know
fails the test, so a new table cannot go untested. Each variant runs on a fresh copy, once tampered while the
vault is closed and once while it is open with keys cached: opening may be refused with a VaultError; every
read path of every principal must raise NotFound / IntegrityError (or KeyUnavailable, for the keyring
bookkeeping in ``meta``, ``owner_keys`` and ``owners``) or return exactly the untouched value; nothing is ever deleted;
and the owner's ``get`` of the tampered row never succeeds when one of its own parts changed.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

from tests.attacks.test_tamper import PRINCIPALS, audit, check, must, open_vault, setcol, swaps, table_counts, world
from vault import KeyUnavailable, VaultError

TABLES = ("chunks", "meta", "owner_keys", "owners", "rows", "summaries")
ROW_PARTS = ("rows", "summaries", "chunks")
__all__ = ["world"]  # the module-scoped fixture of test_tamper.py, shared here


def blob_mutations(value: bytes) -> dict[str, bytes]:
    def flip(at: int) -> bytes:
        data = bytearray(value)
        data[at] ^= 0x01
        return bytes(data)

    found = {"truncated": value[:-1], "emptied": b"", "extended": value + b"\x00", "wrong_type": 12345}
    if value:
        found |= {"flip_start": flip(0), "flip_middle": flip(len(value) // 2), "flip_end": flip(len(value) - 1)}
    return found


def mutations(value: object) -> dict[str, object]:
    """What an attacker can write over one stored value, by its storage class."""
    if isinstance(value, bytes):
        return blob_mutations(value)
    if isinstance(value, int):
        return {"plus_one": value + 1, "minus_one": value - 1, "moved_far": value + 1000, "wrong_type": b"\x01"}
    if isinstance(value, float):
        return {"earlier": value - 1.0, "later": value + 1.0, "much_later": value + 86400.0, "wrong_type": "soon"}
    if isinstance(value, str):
        return {"renamed": value + "x", "emptied": "", "wrong_type": value.encode()}
    raise AssertionError(f"a stored value of an unexpected type: {type(value).__name__}")


def targets(path: Path, seqs: dict[str, int]) -> list[tuple[str, str, str, tuple]]:
    """(table, label, WHERE clause, parameters) of every cell the matrix tampers with."""
    big = seqs["big"]
    with closing(sqlite3.connect(path)) as conn:
        tables = sorted(name for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"))
        owner_tag = conn.execute("SELECT owner_tag FROM rows WHERE seq = ?", (big,)).fetchone()[0]
        names = [name for (name,) in conn.execute("SELECT name FROM meta ORDER BY name")]
        versions = [v for (v,) in conn.execute("SELECT version FROM owner_keys WHERE owner_tag = ?", (owner_tag,))]
        chunks = [pos for (pos,) in conn.execute("SELECT pos FROM chunks WHERE pos >> 20 = ? ORDER BY pos", (big,))]
    assert tuple(tables) == TABLES, f"the schema's tables changed: extend the tamper matrix to {tables}"
    assert len(chunks) == 3 and names and versions
    return ([("rows", "big", "seq = ?", (big,)), ("summaries", "big", "seq = ?", (big,))]
            + [("chunks", f"chunk {pos & 0xFFFFF}", "pos = ?", (pos,)) for pos in chunks]
            + [("meta", name, "name = ?", (name,)) for name in names]
            + [("owner_keys", f"v{v}", "owner_tag = ? AND version = ?", (owner_tag, v)) for v in versions]
            + [("owners", "alice", "owner_tag = ?", (owner_tag,))])


def variants(path: Path, seqs: dict[str, int], table: str) -> list[tuple[str, Callable]]:
    """Every (name, tamper) of one table: each column of each target cell, each mutation."""
    found = []
    with closing(sqlite3.connect(path)) as conn:
        for name, label, where, params in (t for t in targets(path, seqs) if t[0] == table):
            columns = [column for _, column, *_ in conn.execute(f"PRAGMA table_info({table})")]
            for column in columns:
                value = conn.execute(f"SELECT {column} FROM {name} WHERE {where}", params).fetchone()[0]
                for mutation, new in mutations(value).items():
                    sql = f"UPDATE {name} SET {column} = ? WHERE {where}"
                    found.append((f"{table}[{label}].{column}:{mutation}", lambda c, s=sql, v=new, p=params:
                                  c.execute(s, (v, *p)).rowcount))
    return found


def attack(world: dict, directory: Path, tamper: Callable, while_open: bool) -> tuple[dict | None, int]:
    """Tamper a fresh copy; returns (audit outcomes, or None if opening was refused; rows changed)."""
    shutil.copytree(world["root"], directory)
    path = directory / "a" / "v.db"
    counts = table_counts(path)
    vault = open_vault(path, world["ring"]) if while_open else None
    if vault is not None:
        vault.get(PRINCIPALS["alice"], world["ids"]["big"])
    with closing(sqlite3.connect(path)) as conn:
        try:
            changed = tamper(conn)
        except sqlite3.IntegrityError:  # e.g. a primary key onto an existing one: not a state an attacker can make
            changed = 0
        conn.commit()
    try:
        if changed == 0:
            return None, 0
        try:
            vault = vault or open_vault(path, world["ring"])
        except VaultError:
            assert table_counts(path) == counts, "a refused open removed stored data"
            return None, changed
        return audit(vault, path, world, tolerated=(KeyUnavailable,)), changed
    finally:
        if vault is not None:
            vault.close()


@pytest.mark.parametrize("table", TABLES)
def test_every_column_tampered_never_yields_altered_content_or_deletes(world, tmp_path, table):
    source, applied = world["root"] / "a" / "v.db", 0
    found = variants(source, world["seqs"], table)
    assert found, f"no tamper variants for {table}"
    for number, (name, tamper) in enumerate(found):
        for while_open in (False, True):
            outcomes, changed = attack(world, tmp_path / f"{number}-{while_open}", tamper, while_open)
            applied += changed > 0
            if outcomes is not None and table in ROW_PARTS:
                assert outcomes[("alice", world["ids"]["big"], "get")] in {"notfound", "integrity"}, (name, while_open)
    assert applied >= len(found), f"only {applied} of {2 * len(found)} variants could be applied to {table}"


def test_parts_moved_between_two_turns_of_one_owner_are_detected(world, tmp_path):
    """Cut-and-paste across turns (test_tamper.py covers rows, owners and vaults): alice's big row (turn t)
    and her binary row (turn u) swap wrapped keys, metadata, summaries, first chunks, whole envelopes; then the
    big row is re-tagged into turn u."""
    check(world, tmp_path / "swaps", swaps("blob"), must("get") + must("get", row="blob"))
    check(world, tmp_path / "retag", [setcol("turn_tag", source="blob")],
          must("get", "head") + must("list", row="u"))
