"""An attacker with write access to the database file: flipped, cut, moved and swapped bytes; every column of every
table mutated (the tamper matrix); parts moved between rows, turns, owners and vaults; the keyring bookkeeping in
the file; pages garbled and the file cut short.

Every read path must raise IntegrityError or NotFound, or return exactly what the untouched vault returned; a
detected forgery is counted and deletes nothing (tests/attacks/tamper_world.py). Each case runs twice: tampering
while the vault is closed, then reopening it, and tampering while the vault is open with its keys cached.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from tests.attacks.stores import attacker_class
from tests.attacks.tamper_world import (
    ANY_DENIAL,
    INTEGRITY,
    PATHS,
    PRINCIPALS,
    Target,
    audit,
    build_world,
    check,
    fresh_copy,
    must,
    open_copy,
    open_vault,
)
from tests.support.clock import T0
from vault import IntegrityError, KeyUnavailable, Principal, Vault, VaultError

AT = (0.0, 0.5, 1.0)
Tamper = Callable[[Target], None]
TABLES = attacker_class().TABLES  # of the store under test


# the layout from before schema 3 repeats the whole matrix: slow, so the quick tier runs the current layout's only
@pytest.fixture(scope="module", params=[pytest.param(layout, marks=pytest.mark.slow) if layout == "legacy" else layout
                                        for layout in attacker_class().LAYOUTS])
def world(tmp_path_factory, request, attacker_for):
    """Vaults A and B in files made by this scratchvault, or laid out as before schema 3 (SQLite's alone)."""
    return build_world(tmp_path_factory.mktemp("tamper"), request.param, attacker_for)


# -- flipped bytes -------------------------------------------------------------------------------------------------
FLIPS = {  # name: (part, chunk, what alice's get of the big row must give)
    "id": ("id", None, {"notfound"}), "owner_tag": ("owner_tag", None, {"notfound"}),
    **{column: (column, None, INTEGRITY) for column in ("turn_tag", "wrapped_key", "metadata")},
    "summary": ("summary", None, INTEGRITY),
    **{f"chunk{i}": ("chunk", i, INTEGRITY) for i in range(3)},
}


@pytest.mark.parametrize("target", sorted(FLIPS))
def test_flipped_byte_raises_integrity_error_or_not_found(world, tmp_path, target):
    part, chunk, expected = FLIPS[target]
    # an id changed in the file names some other seq (ids encrypt their row's seq): it leads to no row; in a file
    # made before schema 3 the index on ids finds the row, and the id, bound into every AAD, no longer fits it
    changed_id = {"notfound"} if world["layout"] == "new" else INTEGRITY
    required = must("get", allowed=expected) + (must("get", row="new", allowed=changed_id) if target == "id" else [])
    check(world, tmp_path, [lambda t, at=at: t.a.flip(t.big, part, at, chunk) for at in AT], required)


# -- one row's parts cut, set, dropped, swapped or moved --------------------------------------------------------------
def resize(part: str, chunk: int | None = None) -> list[Tamper]:
    """Cut one byte, cut to nothing, append one byte."""
    def change(t: Target, how: Callable[[bytes], bytes]) -> None:
        t.a.write(t.big, part, how(t.a.read(t.big, part, chunk)), chunk)
    return [lambda t, how=how: change(t, how) for how in (lambda b: b[:-1], lambda b: b"", lambda b: b + b"\0")]


def setcol(column: str, value=None, source: str | None = None) -> Tamper:
    """Set a column of the big row to ``value``, or to the same column of row ``source``."""
    return lambda t: t.a.write(t.big, column, t.a.read(t.seqs[source], column) if source else value)


SWAPPED_ENVELOPE = ("key_version", "expires_at", "size_bytes", "wrapped_key", "metadata")


def swaps(other: str) -> list[Tamper]:
    """Swap wrapped key, metadata, summary, first chunk, then the whole envelope, between big and ``other``."""
    return [lambda t, p=p, k=k: t.a.swap(t.big, t.seqs[other], p, k, k)
            for p, k in (("wrapped_key", None), ("metadata", None), ("summary", None), ("chunk", 0))] + [
        lambda t: [t.a.swap(t.big, t.seqs[other], c) for c in SWAPPED_ENVELOPE]]


def from_b(*parts: str, chunk: int | None = None) -> Tamper:
    """The big row's ``parts`` replaced by those of vault B's row 1 (alice's there)."""
    return lambda t: [t.a.write(t.big, part, t.b.read(1, part, chunk), chunk) for part in parts]


def copied_from_b(tags_of: str | None = None) -> Tamper:
    """Vault B's row 1 with its summary and chunks inserted after A's last row; optionally with an A row's tags."""
    def tamper(t: Target) -> None:
        saved, tags = t.b.save_row(1), {}
        if tags_of is not None:
            tags = {column: t.a.read(t.seqs[tags_of], column) for column in ("owner_tag", "turn_tag")}
        t.a.write_row(replace(saved, seq=t.a.next_free_seq()), **tags)
    return tamper


def trade_places(t: Target) -> None:
    t.a.move_row(t.big, 10**6)
    t.a.move_row(t.seqs["json"], t.big)
    t.a.move_row(10**6, t.seqs["json"])


CASES = {
    "key_version_changed": ([setcol("key_version", 2), setcol("key_version", 0)], must("get")),
    "expires_at_moved_into_past": ([setcol("expires_at", T0 - 1)], must("get", allowed={"notfound"})),
    "expires_at_earlier_still_future": ([setcol("expires_at", T0 + 60)], must("get", "head")),
    "expires_at_later": ([setcol("expires_at", T0 + 10 * 86400)], must("get", "head", "tail")),
    "size_bytes_changed": ([setcol("size_bytes", 150_001), setcol("size_bytes", 0)], must("get")),
    "wrapped_key_resized": (resize("wrapped_key"), must("get", "head")),
    "metadata_resized": (resize("metadata"), must("get", "head")),
    "summary_resized": (resize("summary"), must("get")),
    "first_chunk_resized": (resize("chunk", 0), must("get", "head")),
    "last_chunk_resized": (resize("chunk", 2), must("get", "tail")),
    "middle_chunk_deleted": ([lambda t: t.a.remove(t.big, "chunk", 1)], must("get", "range")),
    "last_chunk_deleted": ([lambda t: t.a.remove(t.big, "chunk", 2)], must("get", "tail")),
    "extra_chunk_appended": ([lambda t: t.a.add_chunk(t.big, 3, t.a.read(t.big, "chunk", 2)),
                              lambda t, extra=random.randbytes(1000): t.a.add_chunk(t.big, 3, extra)], []),
    "chunks_reordered": ([lambda t: t.a.swap(t.big, t.big, "chunk", 0, 1),
                          lambda t: t.a.swap(t.big, t.big, "chunk", 1, 2)], must("get")),
    "summary_deleted": ([lambda t: t.a.remove(t.big, "summary")], must("get") + must("list", row="t")),
    "same_owner_swaps": (swaps("json"), must("get") + must("get", row="json")),
    "cross_owner_swaps": (swaps("bob"), must("get") + must("get", who="bob", row="bob")),
    "alice_row_retagged_as_bobs": ([lambda t: [setcol(c, source="bob")(t) for c in ("owner_tag", "turn_tag")]],
                                   must("get", who="bob") + must("list", who="bob", row="t")
                                   + must("get", allowed={"notfound"})),
    "vault_b_parts_in_vault_a_row": ([from_b("wrapped_key", "metadata", "size_bytes", "expires_at"),
                                      from_b("summary"), from_b("chunk", chunk=0)], must("get")),
    "vault_b_row_copied_verbatim": ([copied_from_b()], must("get", row="new", allowed={"notfound"})),
    # its id names a seq under vault B's key, not this vault's: the get finds no row; the listing opens nothing
    "vault_b_row_given_alice_tags": ([copied_from_b("big")],
                                     must("get", row="new", allowed={"notfound"}) + must("list", row="t")),
    # a row's id names its seq: moved elsewhere, or two rows trading places, no id reaches its row any more
    "row_moved_to_another_seq": ([lambda t: t.a.move_row(t.big, t.big + 1000)],
                                 must("get", "head", allowed={"notfound"})),
    "rows_trade_places": ([trade_places],
                          must("get", "head", allowed={"notfound"}) + must("get", row="json", allowed={"notfound"})),
    # columns of the wrong type or range (these once escaped as raw TypeError / struct.error, or uncounted)
    "turn_tag_as_text": ([setcol("turn_tag", "text")], must("get", allowed=ANY_DENIAL)),
    "wrapped_key_as_integer": ([setcol("wrapped_key", 60)], must("get")),
    "expires_at_as_text": ([setcol("expires_at", "text")], must("get")),
    "negative_numbers": ([setcol("key_version", -1), setcol("size_bytes", -1)], must("get")),
    "sealed_parts_as_text": ([lambda t: [t.a.write(t.big, "chunk", "text", i) for i in range(3)],
                              lambda t: t.a.write(t.big, "summary", "text")], must("get")),
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


def test_parts_moved_between_two_turns_of_one_owner_are_detected(world, tmp_path):
    """Cut-and-paste across turns (the cases above cover rows, owners and vaults): alice's big row (turn t) and her
    binary row (turn u) swap wrapped keys, metadata, summaries, first chunks, whole envelopes; then the big row is
    re-tagged into turn u."""
    check(world, tmp_path / "swaps", swaps("blob"), must("get") + must("get", row="blob"))
    check(world, tmp_path / "retag", [setcol("turn_tag", source="blob")],
          must("get", "head") + must("list", row="u"))


# -- the tamper matrix: every column of every table ------------------------------------------------------------------
ROW_PARTS = ("rows", "summaries", "chunks")


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
    """What an attacker can write over one stored value, by its storage class (NULL: a part the row does not hold
    there, filled)."""
    if value is None:
        return {"filled": bytes(range(64))}
    if isinstance(value, bytes):
        return blob_mutations(value)
    if isinstance(value, int):
        return {"plus_one": value + 1, "minus_one": value - 1, "moved_far": value + 1000, "wrong_type": b"\x01"}
    if isinstance(value, float):
        return {"earlier": value - 1.0, "later": value + 1.0, "much_later": value + 86400.0, "wrong_type": "soon"}
    if isinstance(value, str):
        return {"renamed": value + "x", "emptied": "", "wrong_type": value.encode()}
    raise AssertionError(f"a stored value of an unexpected type: {type(value).__name__}")


# the rows the matrix targets beside the big one, and the cells of theirs it takes: the summary and only chunk a new
# row of one chunk holds in its row, and those a row written before schema 6 keeps in their tables
ALSO_TARGETED = {"json": lambda cell: cell.table == "rows" and cell.column in ("summary", "chunk"),
                 "old": lambda cell: cell.table in ("summaries", "chunks")}


def variants(attacker, seqs: dict[str, int], table: str) -> list[tuple[str, str, Callable]]:
    """Every (row, name, tamper) of one table: each column of each cell the matrix targets, each mutation; a
    tamper returns how many stored rows it changed."""
    cells = [("big", cell) for cell in attacker.cells(seqs["big"])]
    assert {cell.table for _, cell in cells} == set(TABLES) - {"summaries"}  # the big row holds its summary
    assert len({cell.label for _, cell in cells if cell.table == "chunks"}) == 3
    for row, wanted in ALSO_TARGETED.items():
        cells += [(row, cell) for cell in attacker.cells(seqs[row]) if wanted(cell)]
    return [(row, f"{row}:{cell.table}[{cell.label}].{cell.column}:{mutation}",
             lambda a, c=cell, v=new: a.write_cell(c, v))
            for row, cell in cells if cell.table == table
            for mutation, new in mutations(attacker.read_cell(cell)).items()]


def attack(world: dict, directory: Path, tamper: Callable, while_open: bool) -> tuple[dict | None, int]:
    """Tamper a fresh copy; returns (audit outcomes, or None if opening was refused; rows changed)."""
    path = fresh_copy(world, directory)
    attacker = world["attacker_for"](path)
    counts = attacker.counts()
    vault = open_copy(world, path) if while_open else None
    if vault is not None:
        vault.get(PRINCIPALS["alice"], world["ids"]["big"])
    changed = tamper(attacker)
    try:
        if changed == 0:
            return None, 0
        try:
            vault = vault or open_copy(world, path)
        except VaultError:
            assert attacker.counts() == counts, "a refused open removed stored data"
            return None, changed
        return audit(vault, attacker, world, tolerated=(KeyUnavailable,)), changed
    finally:
        if vault is not None:
            vault.close()
        world["attacker_for"].discard(directory)


@pytest.mark.parametrize("table", TABLES)
def test_every_column_tampered_never_yields_altered_content_or_deletes(world, tmp_path, table):
    """Targets: the big row's ``rows`` (its summary among them; its empty ``chunk`` filled) and every ``chunks``
    entry, the summary and chunk a one-chunk row holds in ``rows``, the ``summaries`` and ``chunks`` entries of a
    row written before schema 6, every ``meta`` entry, the owner's ``owner_keys``, ``owners`` and ``deletions``
    (ledger of deleted rows) entries, each column flipped at its start, middle and end, cut short, emptied,
    extended, nudged (numbers) and given the wrong type. Opening may be refused with a VaultError; reads may also
    meet KeyUnavailable (the keyring bookkeeping); the owner's get of the row never succeeds when a part of it
    changed."""
    applied = 0
    found = variants(world["attacker_for"](world["root"] / "a" / "v.db"), world["seqs"], table)
    assert found, f"no tamper variants for {table}"
    for number, (row, name, tamper) in enumerate(found):
        for while_open in (False, True):
            outcomes, changed = attack(world, tmp_path / f"{number}-{while_open}", tamper, while_open)
            applied += changed > 0
            if outcomes is not None and table in ROW_PARTS:
                assert outcomes[("alice", world["ids"][row], "get")] in {"notfound", "integrity"}, (name, while_open)
    assert applied >= len(found), f"only {applied} of {2 * len(found)} variants could be applied to {table}"


# -- the keyring bookkeeping in the file --------------------------------------------------------------------------
def tampered_copy(world: dict, directory: Path, tamper: Callable) -> Path:
    path = fresh_copy(world, directory)
    tamper(world["attacker_for"](path))
    return path


def test_flipped_key_commitment_or_vault_id_is_refused(world, tmp_path):
    """Keyring bookkeeping in the file: a wrong commitment or vault id is refused on key load, never content."""
    check(world, tmp_path / "all", [lambda t: t.a.set_all_commitments(bytes(32))], tolerated=(KeyUnavailable,))
    pristine = world["attacker_for"](world["root"] / "a" / "v.db").counts()
    for number, tamper in enumerate((lambda a: a.set_all_commitments(bytes(32)),
                                     lambda a: a.set_meta("vault_id", bytes(16)))):
        path = tampered_copy(world, tmp_path / str(number), tamper)
        with pytest.raises(KeyUnavailable), open_copy(world, path) as vault:
            vault.get(PRINCIPALS["alice"], world["ids"]["big"])
        assert world["attacker_for"](path).counts() == pristine


def test_a_database_that_lost_its_vault_id_is_not_given_a_new_one(db_path, keyring_backend, attacker):
    with Vault.open(db_path, keyring_backend=keyring_backend) as vault:
        vault.put(Principal("alice"), "t", 1, "x", "kept")
    secrets_before = dict(keyring_backend.secrets)
    attacker.delete_meta("vault_id")
    with pytest.raises(IntegrityError):
        Vault.open(db_path, keyring_backend=keyring_backend)
    assert keyring_backend.secrets == secrets_before  # no new index key or keyset was made


WRONG_TYPE = {"vault_id": lambda a: a.set_meta("vault_id", "text"),
              "key_commitment": lambda a: a.set_all_commitments("text"),
              "key_version": lambda a: a.set_all_key_versions("9z")}


@pytest.mark.parametrize("stored", sorted(WRONG_TYPE))
def test_keyring_bookkeeping_of_wrong_type_is_a_vault_error(world, tmp_path, stored):
    path = tampered_copy(world, tmp_path / "copy", WRONG_TYPE[stored])
    calls = [lambda v: v.get(PRINCIPALS["alice"], world["ids"]["big"])]
    if stored == "key_version":  # versions are read where keys are made and destroyed too
        calls += [lambda v: v.rotate_owner_key("alice"), lambda v: v.shred_owner("alice")]
    for call in calls:
        with pytest.raises(VaultError), open_copy(world, path) as vault:
            call(vault)


# -- a damaged file ---------------------------------------------------------------------------------------------
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


@pytest.mark.sqlite_only("pages of the database file: PostgreSQL's data files are the server's, never a client's")
@pytest.mark.parametrize("damage", ["garbage_page", "truncated_file"])
def test_corrupted_database_file_gives_vault_errors_not_sqlite_errors(world, tmp_path, damage):
    source = world["attacker_for"](world["root"] / "a" / "v.db")
    size, page_size = source.path.stat().st_size, source.PAGE
    pages = range(source.pages()) if damage == "garbage_page" else (size // 2, page_size, 100)
    rng, refused = random.Random(7), 0
    for number, page in enumerate(pages):
        directory = tmp_path / str(number)
        directory.mkdir(mode=0o700)
        source.copy_file(directory / "v.db")
        attacker = world["attacker_for"](directory / "v.db")
        if damage == "garbage_page":
            attacker.garble_page(page, rng)
        else:
            attacker.truncate(page)
        try:
            with open_vault(attacker.path, world["ring"]) as vault:
                refused += every_path(vault, world)
        except VaultError:
            refused += 1
        except Exception as error:
            pytest.fail(f"{damage} {page}: {type(error).__module__}.{type(error).__name__} escaped: {error}")
    assert refused >= len(pages) // 2, "the damage was hardly ever noticed: is the test damaging the file?"
