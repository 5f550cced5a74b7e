"""Where a row keeps its summary and chunks, as a writer of the database rearranges it: a one-chunk row's chunk
moved between its own column and the chunks table, a second chunk planted beside it, a larger row's first chunk
moved into (or planted in) the row, the size column made to say one chunk or several, and an older row holding a
summary in both places. The number of chunks a read opens comes from the sealed metadata and the last is marked in
its nonce, so every read path must raise IntegrityError or NotFound, or return exactly what the untouched vault
returned (tests/attacks/tamper_world.py)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from keys.formats.stream import CHUNK_BYTES
from tests.attacks.tamper_world import INTEGRITY, Target, check, must
from tests.attacks.test_held_parts import held
from tests.attacks.test_tampering import world  # noqa: F401 (the module's fixture)

Tamper = Callable[[Target], None]
UNCHANGED_OR_REFUSED = INTEGRITY | {"ok"}  # "ok" is checked by the audit to equal what the untouched vault gave


def held_chunk_to_table(t: Target) -> None:
    """The json row's only chunk taken out of the row and stored where a larger row keeps its chunk 0."""
    sealed = held(t, "json", "chunk")
    t.a.hold(t.seqs["json"], "chunk", None)
    t.a.add_chunk(t.seqs["json"], 0, sealed)


def held_chunk_replaced_in_table_by(source: str) -> Tamper:
    """The json row's chunk emptied, and row ``source``'s chunk 0 stored for it in the chunks table."""
    def tamper(t: Target) -> None:
        t.a.add_chunk(t.seqs["json"], 0, held(t, source, "chunk"))
        t.a.hold(t.seqs["json"], "chunk", None)
    return tamper


def second_chunk_planted(source: str, index: int) -> Tamper:
    """A chunk ``index`` planted in the chunks table for the json row, which holds its only chunk itself."""
    return lambda t: t.a.add_chunk(t.seqs["json"], index, held(t, source, "chunk") if index == 0 or source == "json"
                                   else t.a.read(t.seqs[source], "chunk", index))


def big_first_chunk_into_row(source: str) -> Tamper:
    """The big row's chunk 0 taken out of the chunks table, and row ``source``'s chunk 0 held in the row instead."""
    def tamper(t: Target) -> None:
        planted = held(t, source, "chunk")
        t.a.remove(t.big, "chunk", 0)
        t.a.hold(t.big, "chunk", planted)
    return tamper


def resized(row: str, size_bytes: int) -> Tamper:
    return lambda t: t.a.write(t.seqs[row], "size_bytes", size_bytes)


def old_summary_in_both_places(inline: str, table: str) -> Tamper:
    """The old row (summary in its table) given row ``inline``'s summary in its own column, and row ``table``'s in
    the summaries table."""
    def tamper(t: Target) -> None:
        in_row, in_table = held(t, inline, "summary"), held(t, table, "summary")
        t.a.plant_summary(t.seqs["old"], in_table)
        t.a.hold(t.seqs["old"], "summary", in_row)
    return tamper


JSON_READS = must("get", "head", row="json")
CASES: dict[str, tuple[list[Tamper], list]] = {
    "held_chunk_moved_to_the_chunks_table": ([held_chunk_to_table],
                                             must("get", "head", row="json", allowed=UNCHANGED_OR_REFUSED)),
    "held_chunk_emptied_another_rows_in_the_chunks_table": (
        [held_chunk_replaced_in_table_by("bob"), held_chunk_replaced_in_table_by("old"),
         held_chunk_replaced_in_table_by("big")], JSON_READS),
    "one_chunk_row_given_a_second_chunk": (
        [second_chunk_planted("json", 1), second_chunk_planted("big", 1), second_chunk_planted("bob", 0)],
        must("get", "head", row="json", allowed=UNCHANGED_OR_REFUSED)),
    "big_rows_first_chunk_held_in_the_row": ([big_first_chunk_into_row("big")],
                                             must("get", "head", allowed=UNCHANGED_OR_REFUSED)),
    "big_rows_first_chunk_replaced_by_one_held_in_the_row": (
        [big_first_chunk_into_row("json"), big_first_chunk_into_row("bob")], must("get", "head")),
    "one_chunk_row_sized_as_several": ([resized("json", CHUNK_BYTES + 1), resized("json", 3 * CHUNK_BYTES)],
                                       JSON_READS),
    "older_one_chunk_row_sized_as_several": ([resized("old", CHUNK_BYTES + 1)], must("get", "head", row="old")),
    "big_row_sized_as_one_chunk": ([resized("big", CHUNK_BYTES), resized("big", 0)], must("get", "head")),
    "older_row_summary_in_both_places": (
        [old_summary_in_both_places("old", "json"), old_summary_in_both_places("json", "old")],
        must("get", row="old", allowed=UNCHANGED_OR_REFUSED) + must("list", row="t", allowed=UNCHANGED_OR_REFUSED)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_rearranged_held_part_never_yields_another_rows_or_cut_content(world, tmp_path, case):  # noqa: F811
    variants, required = CASES[case]
    check(world, tmp_path, variants, required)


@pytest.mark.parametrize("how", ["delete", "gc", "shred"])
def test_a_row_holding_its_parts_in_both_places_leaves_neither_after_it_goes(vault, attacker, alice, clock, how):
    """A row given copies of its summary and only chunk where older rows keep theirs (and an older row given them in
    the row): whatever removes a row removes both places."""
    held_row = vault.put(alice, "t", 1, "x", "held " * 40, ttl_seconds=60)
    older = vault.put(alice, "t", 2, "x", "older " * 40, ttl_seconds=60)
    attacker.lay_out_as_before_inline(attacker.seq_of(older.id))
    seq, older_seq = attacker.seq_of(held_row.id), attacker.seq_of(older.id)
    attacker.plant_summary(seq, attacker.read(seq, "summary"))  # the held row's parts copied into the tables
    attacker.add_chunk(seq, 0, attacker.read(seq, "chunk", 0))
    attacker.hold(older_seq, "summary", attacker.read(older_seq, "summary"))  # the older row's into the row
    attacker.hold(older_seq, "chunk", attacker.read(older_seq, "chunk", 0))
    assert attacker.counts() == (2, 4, 4)
    if how == "delete":
        vault.delete(alice, held_row.id)
        vault.delete(alice, older.id)
    elif how == "gc":
        clock.advance(61)
        assert vault.gc() == 2
    else:
        assert vault.shred_owner(alice.user_id) == 2
    assert attacker.counts() == (0, 0, 0)
