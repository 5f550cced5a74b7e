"""An attacker with write access to the database file: flipped, cut, moved and swapped bytes.

Every read path must raise IntegrityError or NotFound, or return exactly what the untouched vault returned;
a detected forgery is counted and deletes nothing. Each case runs twice: tampering while the vault is
closed, then reopening it, and tampering (through SQLite) while the vault is open with its keys cached.
"""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

from keys.testing import MemoryKeyring
from tests.support.clock import T0, FakeClock
from tests.support.sqlite_files import legacy_file, table_counts
from vault import IntegrityError, KeyUnavailable, NotFound, Principal, Vault, VaultError

PRINCIPALS = {"alice": Principal("alice", actor="planner"), "bob": Principal("bob")}
TURNS = ("t", "u")
BIG = "".join(f"line {i:06d} of the page\n" for i in range(6250))  # 150,000 chars: 3 chunks
PATHS: dict[str, Callable] = {
    "get": lambda v, p, i: v.get(p, i),
    "head": lambda v, p, i: v.read(p, i, mode="head", n=100),
    "tail": lambda v, p, i: v.read(p, i, mode="tail", n=100),
    "range": lambda v, p, i: v.read(p, i, mode="range", start=70_000, end=70_100),
    "full": lambda v, p, i: v.read(p, i, mode="full"),
}


def open_vault(path: Path, ring: MemoryKeyring) -> Vault:
    return Vault.open(path, keyring_backend=ring, clock=FakeClock(T0), max_read=200_000)


@pytest.fixture(scope="module", params=["new", "legacy"])
def world(tmp_path_factory, request):
    """Vault A (alice: 3-chunk text, json, binary; bob: text) and vault B, on one in-memory keyring; in files made
    by this scratchvault (rows found by the seq their id names) or before schema 3 (found by an index on ids)."""
    root = tmp_path_factory.mktemp("tamper")
    ring = MemoryKeyring()
    alice, bob = PRINCIPALS["alice"], PRINCIPALS["bob"]
    os.mkdir(root / "a", 0o700)
    os.mkdir(root / "b", 0o700)
    if request.param == "legacy":
        legacy_file(root / "a" / "v.db")
        legacy_file(root / "b" / "v.db")
    with open_vault(root / "a" / "v.db", ring) as a:
        ids = {"big": a.put(alice, "t", 1, "web.fetch", BIG).id,
               "json": a.put(alice, "t", 2, "ls", {"entries": list(range(50)), "count": 50}).id,
               "blob": a.put(alice, "u", 1, "download", bytes(range(256)) * 300).id,
               "bob": a.put(bob, "t", 1, "web.fetch", "bob's page " * 100).id}
        pristine = {(who, i, name): call(a, p, i) for who, p in PRINCIPALS.items() for i in ids.values()
                    for name, call in PATHS.items() if (who == "bob") == (i == ids["bob"])}
        lists = {(who, turn): a.list_for_turn(p, turn) for who, p in PRINCIPALS.items() for turn in TURNS}
    with open_vault(root / "b" / "v.db", ring) as b:
        b.put(alice, "t", 1, "web.fetch", "vault b, alice " * 100)
        b.put(bob, "t", 1, "web.fetch", "vault b, bob " * 100)
    with closing(sqlite3.connect(root / "a" / "v.db")) as conn:
        seqs = {name: conn.execute("SELECT seq FROM rows WHERE id = ?", (bytes.fromhex(i),)).fetchone()[0]
                for name, i in ids.items()}
        chunks = conn.execute("SELECT pos & 1048575 FROM chunks WHERE pos >> 20 = ?", (seqs["big"],)).fetchall()
    assert sorted(chunks) == [(0,), (1,), (2,)]
    assert len(pristine[("alice", ids["big"], "get")].content) == 150_000
    return dict(root=root, ring=ring, ids=ids, seqs=seqs, pristine=pristine, lists=lists, layout=request.param)


class Db:
    """The attacker's handle on vault A's file (plain sqlite3), addressing rows by their test name."""

    def __init__(self, conn: sqlite3.Connection, seqs: dict[str, int], b_path: Path) -> None:
        self.conn, self.seqs, self.b_path = conn, seqs, b_path

    def _where(self, table: str, row: str, chunk: int | None) -> tuple[str, int]:
        seq = self.seqs[row]
        return ("pos = ?", seq << 20 | chunk) if table == "chunks" else ("seq = ?", seq)

    def get(self, table: str, column: str, row: str, chunk: int | None = None):
        where, key = self._where(table, row, chunk)
        return self.conn.execute(f"SELECT {column} FROM {table} WHERE {where}", (key,)).fetchone()[0]

    def set(self, table: str, column: str, row: str, value, chunk: int | None = None) -> None:
        where, key = self._where(table, row, chunk)
        assert self.conn.execute(f"UPDATE {table} SET {column} = ? WHERE {where}", (value, key)).rowcount == 1

    def run(self, sql: str, *params) -> None:
        assert self.conn.execute(sql, params).rowcount >= 1

    def flip(self, table: str, column: str, row: str, at: float, chunk: int | None = None) -> None:
        data = bytearray(self.get(table, column, row, chunk))
        data[min(int(len(data) * at), len(data) - 1)] ^= 0x01
        self.set(table, column, row, bytes(data), chunk)

    def swap(self, table: str, column: str, one: str, two: str, chunk=None, other_chunk=None) -> None:
        first, second = self.get(table, column, one, chunk), self.get(table, column, two, other_chunk)
        self.set(table, column, one, second, chunk)
        self.set(table, column, two, first, other_chunk)

    def move(self, seq: int, to: int) -> None:
        """Move the row at ``seq`` with its summary and chunks to ``to`` (a seq no row uses)."""
        self.run("UPDATE rows SET seq = ? WHERE seq = ?", to, seq)
        self.run("UPDATE summaries SET seq = ? WHERE seq = ?", to, seq)
        self.run("UPDATE chunks SET pos = (? << 20) | (pos & 1048575) WHERE pos >> 20 = ?", to, seq)

    def attach_b(self) -> None:
        self.conn.execute("ATTACH DATABASE ? AS b", (str(self.b_path),))

    def copy_row_from_b(self, b_seq: int, tags_of: str | None = None) -> None:
        """Insert vault B's row ``b_seq`` with its chunks and summary; optionally with an A row's tags."""
        self.attach_b()
        seq = self.conn.execute("SELECT max(seq) + 1 FROM rows").fetchone()[0]
        tags = "r.owner_tag, r.turn_tag" if tags_of is None else "a.owner_tag, a.turn_tag"
        self.run(f"INSERT INTO rows SELECT ?, r.id, {tags}, r.key_version, r.expires_at, r.size_bytes, "
                 "r.wrapped_key, r.metadata FROM b.rows r, main.rows a WHERE r.seq = ? AND a.seq = ?",
                 seq, b_seq, self.seqs[tags_of or "big"])
        self.run("INSERT INTO summaries SELECT ?, sealed FROM b.summaries WHERE seq = ?", seq, b_seq)
        self.run("INSERT INTO chunks SELECT (? << 20) | (pos & 1048575), sealed FROM b.chunks WHERE pos >> 20 = ?",
                 seq, b_seq)



def attempt(vault: Vault, call: Callable, tolerated: tuple = ()) -> tuple[str, object]:
    before = vault.stats()["counters"]["integrity_failures"]
    try:
        return "ok", call()
    except NotFound:
        return "notfound", None
    except IntegrityError:
        assert vault.stats()["counters"]["integrity_failures"] > before, "IntegrityError not counted"
        return "integrity", None
    except tolerated as error:
        return type(error).__name__, None


def audit(vault: Vault, path: Path, world: dict, tolerated: tuple = ()) -> dict:
    """Every principal x every id (pristine or now in the file) x every path, then every listing."""
    pristine, counts = world["pristine"], table_counts(path)
    with closing(sqlite3.connect(path)) as conn:
        present = {bytes(i).hex() for (i,) in conn.execute("SELECT id FROM rows")}
    outcomes = {}
    for who, principal in PRINCIPALS.items():
        for row_id in sorted(present | set(world["ids"].values())):
            for name, call in PATHS.items():
                kind, value = attempt(vault, lambda c=call, i=row_id: c(vault, principal, i), tolerated)
                if kind == "ok":
                    assert (who, row_id, name) in pristine, f"{who} read a row it never owned via {name}"
                    assert value == pristine[(who, row_id, name)], f"{who} got altered content via {name}"
                outcomes[(who, row_id, name)] = kind
        for turn in TURNS:
            kind, listed = attempt(vault, lambda p=principal, t=turn: vault.list_for_turn(p, t), tolerated)
            for rep in listed or ():
                assert rep in world["lists"][(who, turn)], f"{who} listed an altered representation"
            outcomes[(who, turn, "list")] = kind
    for who, principal in PRINCIPALS.items():  # non-owners can never delete, even a row re-tagged as theirs
        for row_id in present:
            if (who, row_id, "get") not in pristine:
                assert attempt(vault, lambda p=principal, i=row_id: vault.delete(p, i), tolerated)[0] != "ok"
    assert table_counts(path) == counts, "a failed read or delete removed stored data"
    return outcomes


def check(world: dict, tmp_path: Path, variants: list, must: list = (), tolerated: tuple = ()) -> None:
    """Each variant on a fresh copy, closed then open; ``must`` lists (who, row, path, {allowed outcomes})."""
    ids = world["ids"]
    for number, tamper in enumerate(variants):
        for while_open in (False, True):
            directory = tmp_path / f"{number}-{while_open}"
            shutil.copytree(world["root"], directory)
            path = directory / "a" / "v.db"
            vault = open_vault(path, world["ring"]) if while_open else None
            if vault is not None:
                vault.get(PRINCIPALS["alice"], ids["big"])  # keys and pages cached before the attack
            with closing(sqlite3.connect(path)) as conn:
                tamper(Db(conn, world["seqs"], directory / "b" / "v.db"))
                conn.commit()
            with vault or open_vault(path, world["ring"]) as opened:
                outcomes = audit(opened, path, world, tolerated)
            new = [key for key in outcomes if key[1] not in ids.values() and key[1] not in TURNS]
            for who, row, name, allowed in must:
                keys = [k for k in new if (k[0], k[2]) == (who, name)] if row == "new" else [
                    (who, ids.get(row, row), name)]
                assert keys and all(outcomes[k] in allowed for k in keys), (who, row, name, while_open, number)


ANY_DENIAL, INTEGRITY = {"notfound", "integrity"}, {"integrity"}
AT = (0.0, 0.5, 1.0)


def must(*paths: str, allowed: set = INTEGRITY, who: str = "alice", row: str = "big") -> list[tuple]:
    return [(who, row, path, allowed) for path in paths]


FLIPS = {  # name: (table, column, chunk, what alice's get of the big row must give)
    "id": ("rows", "id", None, {"notfound"}), "owner_tag": ("rows", "owner_tag", None, {"notfound"}),
    **{column: ("rows", column, None, INTEGRITY) for column in ("turn_tag", "wrapped_key", "metadata")},
    "summary": ("summaries", "sealed", None, INTEGRITY),
    **{f"chunk{i}": ("chunks", "sealed", i, INTEGRITY) for i in range(3)},
}


@pytest.mark.parametrize("target", sorted(FLIPS))
def test_flipped_byte_raises_integrity_error_or_not_found(world, tmp_path, target):
    table, column, chunk, expected = FLIPS[target]
    # an id changed in the file names some other seq (ids encrypt their row's seq): it leads to no row; in a file
    # made before schema 3 the index on ids finds the row, and the id, bound into every AAD, no longer fits it
    changed_id = {"notfound"} if world["layout"] == "new" else INTEGRITY
    required = must("get", allowed=expected) + (must("get", row="new", allowed=changed_id) if target == "id" else [])
    check(world, tmp_path, [lambda db, at=at: db.flip(table, column, "big", at, chunk) for at in AT], required)


def resize(table: str, column: str, chunk: int | None = None) -> list[Callable[[Db], None]]:
    """Cut one byte, cut to nothing, append one byte."""
    def change(db: Db, how: Callable[[bytes], bytes]) -> None:
        db.set(table, column, "big", how(db.get(table, column, "big", chunk)), chunk)
    return [lambda db, how=how: change(db, how) for how in (lambda b: b[:-1], lambda b: b"", lambda b: b + b"\0")]


def setcol(column: str, value=None, source: str | None = None) -> Callable[[Db], None]:
    """Set a column of the big row to ``value``, or to the same column of row ``source``."""
    return lambda db: db.set("rows", column, "big", db.get("rows", column, source) if source else value)


def on_big(statement: str, chunk: int | None = None, *extra) -> Callable[[Db], None]:
    """Run SQL whose first parameter is the big row's seq (or chunk key)."""
    return lambda db: db.run(statement, db.seqs["big"] << 20 | chunk if chunk is not None else db.seqs["big"], *extra)


SWAPPED_ENVELOPE = ("key_version", "expires_at", "size_bytes", "wrapped_key", "metadata")


def swaps(other: str) -> list[Callable[[Db], None]]:
    """Swap wrapped key, metadata, summary, first chunk, then the whole envelope, between big and ``other``."""
    return [lambda db, t=t, c=c, k=k: db.swap(t, c, "big", other, k, k)
            for t, c, k in (("rows", "wrapped_key", None), ("rows", "metadata", None),
                            ("summaries", "sealed", None), ("chunks", "sealed", 0))] + [
        lambda db: [db.swap("rows", c, "big", other) for c in SWAPPED_ENVELOPE]]


def from_b(statement: str, chunk: int | None = None) -> Callable[[Db], None]:
    return lambda db: db.attach_b() or on_big(statement, chunk)(db)


CASES = {
    "key_version_changed": ([setcol("key_version", 2), setcol("key_version", 0)], must("get")),
    "expires_at_moved_into_past": ([setcol("expires_at", T0 - 1)], must("get", allowed={"notfound"})),
    "expires_at_earlier_still_future": ([setcol("expires_at", T0 + 60)], must("get", "head")),
    "expires_at_later": ([setcol("expires_at", T0 + 10 * 86400)], must("get", "head", "tail")),
    "size_bytes_changed": ([setcol("size_bytes", 150_001), setcol("size_bytes", 0)], must("get")),
    "wrapped_key_resized": (resize("rows", "wrapped_key"), must("get", "head")),
    "metadata_resized": (resize("rows", "metadata"), must("get", "head")),
    "summary_resized": (resize("summaries", "sealed"), must("get")),
    "first_chunk_resized": (resize("chunks", "sealed", 0), must("get", "head")),
    "last_chunk_resized": (resize("chunks", "sealed", 2), must("get", "tail")),
    "middle_chunk_deleted": ([on_big("DELETE FROM chunks WHERE pos = ?", 1)], must("get", "range")),
    "last_chunk_deleted": ([on_big("DELETE FROM chunks WHERE pos = ?", 2)], must("get", "tail")),
    "extra_chunk_appended": ([on_big("INSERT INTO chunks SELECT pos + 1, sealed FROM chunks WHERE pos = ?", 2),
                              on_big("INSERT INTO chunks VALUES (?, ?)", 3, random.randbytes(1000))], []),
    "chunks_reordered": ([lambda db: db.swap("chunks", "sealed", "big", "big", 0, 1),
                          lambda db: db.swap("chunks", "sealed", "big", "big", 1, 2)], must("get")),
    "summary_deleted": ([on_big("DELETE FROM summaries WHERE seq = ?")], must("get") + must("list", row="t")),
    "same_owner_swaps": (swaps("json"), must("get") + must("get", row="json")),
    "cross_owner_swaps": (swaps("bob"), must("get") + must("get", who="bob", row="bob")),
    "alice_row_retagged_as_bobs": ([lambda db: [setcol(c, source="bob")(db) for c in ("owner_tag", "turn_tag")]],
                                   must("get", who="bob") + must("list", who="bob", row="t")
                                   + must("get", allowed={"notfound"})),
    "vault_b_parts_in_vault_a_row": ([
        from_b("UPDATE rows SET (wrapped_key, metadata, size_bytes, expires_at) = (SELECT wrapped_key, metadata, "
               "size_bytes, expires_at FROM b.rows WHERE seq = 1) WHERE seq = ?"),
        from_b("UPDATE summaries SET sealed = (SELECT sealed FROM b.summaries WHERE seq = 1) WHERE seq = ?"),
        from_b("UPDATE chunks SET sealed = (SELECT sealed FROM b.chunks WHERE pos = 1 << 20) WHERE pos = ?", 0)],
        must("get")),
    "vault_b_row_copied_verbatim": ([lambda db: db.copy_row_from_b(1)], must("get", row="new", allowed={"notfound"})),
    # its id names a seq under vault B's key, not this vault's: the get finds no row; the listing opens nothing
    "vault_b_row_given_alice_tags": ([lambda db: db.copy_row_from_b(1, "big")],
                                     must("get", row="new", allowed={"notfound"}) + must("list", row="t")),
    # a row's id names its seq: moved elsewhere, or two rows trading places, no id reaches its row any more
    "row_moved_to_another_seq": ([lambda db: db.move(db.seqs["big"], db.seqs["big"] + 1000)],
                                 must("get", "head", allowed={"notfound"})),
    "rows_trade_places": ([lambda db: [db.move(db.seqs["big"], 10**6), db.move(db.seqs["json"], db.seqs["big"]),
                                       db.move(10**6, db.seqs["json"])]],
                          must("get", "head", allowed={"notfound"}) + must("get", row="json", allowed={"notfound"})),
    # columns of the wrong type or range (these once escaped as raw TypeError / struct.error, or uncounted)
    "turn_tag_as_text": ([setcol("turn_tag", "text")], must("get", allowed=ANY_DENIAL)),
    "wrapped_key_as_integer": ([setcol("wrapped_key", 60)], must("get")),
    "expires_at_as_text": ([setcol("expires_at", "text")], must("get")),
    "negative_numbers": ([setcol("key_version", -1), setcol("size_bytes", -1)], must("get")),
    "sealed_parts_as_text": ([on_big("UPDATE chunks SET sealed = 'text' WHERE pos >> 20 = ?"),
                              on_big("UPDATE summaries SET sealed = 'text' WHERE seq = ?")], must("get")),
}


# In a file made before schema 3 a row is found through the index on ids, wherever it sits: a copy from vault B is
# found (and fails its AADs); a moved row, with its summary and chunks, reads as it was (its content is authentic).
LEGACY = {
    "vault_b_row_given_alice_tags": must("get", row="new") + must("list", row="t"),
    "row_moved_to_another_seq": must("get", "head", allowed={"ok"}),
    "rows_trade_places": must("get", "head", allowed={"ok"}) + must("get", row="json", allowed={"ok"}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_tampered_row_never_yields_altered_content(world, tmp_path, case):
    variants, required = CASES[case]
    if world["layout"] == "legacy":
        required = LEGACY.get(case, required)
    check(world, tmp_path, variants, required)


def tampered_copy(world: dict, directory: Path, sql: str) -> Path:
    shutil.copytree(world["root"], directory)
    with closing(sqlite3.connect(directory / "a" / "v.db")) as conn:
        conn.execute(sql)
        conn.commit()
    return directory / "a" / "v.db"


def test_flipped_key_commitment_or_vault_id_is_refused(world, tmp_path):
    """Keyring bookkeeping in the file: a wrong commitment or vault id is refused on key load, never content."""
    check(world, tmp_path / "all", [lambda db: db.run("UPDATE owner_keys SET check_value = zeroblob(32)")],
          tolerated=(KeyUnavailable,))
    for number, sql in enumerate(("UPDATE owner_keys SET check_value = zeroblob(32)",
                                  "UPDATE meta SET value = zeroblob(16) WHERE name = 'vault_id'")):
        path = tampered_copy(world, tmp_path / str(number), sql)
        with pytest.raises(KeyUnavailable), open_vault(path, world["ring"]) as vault:
            vault.get(PRINCIPALS["alice"], world["ids"]["big"])
        assert table_counts(path) == table_counts(world["root"] / "a" / "v.db")


def test_a_database_that_lost_its_vault_id_is_not_given_a_new_one(db_path, keyring_backend):
    with Vault.open(db_path, keyring_backend=keyring_backend) as vault:
        vault.put(Principal("alice"), "t", 1, "x", "kept")
    secrets_before = dict(keyring_backend.secrets)
    with sqlite3.connect(db_path) as db:
        db.execute("DELETE FROM meta WHERE name = 'vault_id'")
    with pytest.raises(IntegrityError):
        Vault.open(db_path, keyring_backend=keyring_backend)
    assert keyring_backend.secrets == secrets_before  # no new index key or keyset was made


@pytest.mark.parametrize("sql", ["UPDATE meta SET value = 'text' WHERE name = 'vault_id'",
                                 "UPDATE owner_keys SET check_value = 'text'"], ids=["vault_id", "key_commitment"])
def test_keyring_bookkeeping_of_wrong_type_is_a_vault_error(world, tmp_path, sql):
    path = tampered_copy(world, tmp_path / "copy", sql)
    with pytest.raises(VaultError), open_vault(path, world["ring"]) as vault:
        vault.get(PRINCIPALS["alice"], world["ids"]["big"])


def every_path(vault: Vault, world: dict) -> int:
    """All operations on a damaged file: each raises a VaultError or returns exactly the pristine value."""
    errors = 0
    for (who, row_id, name), expected in world["pristine"].items():
        try:
            assert PATHS[name](vault, PRINCIPALS[who], row_id) == expected
        except VaultError:
            errors += 1
    for call in (lambda: vault.list_for_turn(PRINCIPALS["alice"], "t"), vault.stats,
                 lambda: vault.put(PRINCIPALS["alice"], "t", 9, "x", "new"), lambda: vault.gc(now=T0 + 10**6)):
        try:
            call()
        except VaultError:
            errors += 1
    return min(errors, 1)


@pytest.mark.parametrize("damage", ["garbage_page", "truncated_file"])
def test_corrupted_database_file_gives_vault_errors_not_sqlite_errors(world, tmp_path, damage):
    source = world["root"] / "a" / "v.db"
    size = source.stat().st_size
    pages = range(size // 4096) if damage == "garbage_page" else (size // 2, 4096, 100)
    rng, refused = random.Random(7), 0
    for number, page in enumerate(pages):
        directory = tmp_path / str(number)
        directory.mkdir(mode=0o700)
        path = directory / "v.db"
        shutil.copy(source, path)
        with open(path, "r+b") as file:
            if damage == "garbage_page":
                file.seek(page * 4096)
                file.write(rng.randbytes(4096))
            else:
                file.truncate(page)
        try:
            with open_vault(path, world["ring"]) as vault:
                refused += every_path(vault, world)
        except VaultError:
            refused += 1
        except Exception as error:
            pytest.fail(f"{damage} {page}: {type(error).__module__}.{type(error).__name__} escaped: {error}")
    assert refused >= len(pages) // 2, "the damage was hardly ever noticed: is the test damaging the file?"
