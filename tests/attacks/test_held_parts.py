"""A row's summary, and a one-chunk row's only chunk, held in the row itself (and, for rows written before schema
6, kept in their tables): an attacker with write access flips, empties, moves, swaps and plants them. Every read
path must raise IntegrityError or NotFound, or return exactly what the untouched vault returned
(tests/attacks/tamper_world.py), as for the parts kept in their tables (test_tampering.py)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.attacks.tamper_world import Target, check, must
from tests.attacks.test_tampering import world  # noqa: F401 (the module's fixture)

Tamper = Callable[[Target], None]


def held(t: Target, row: str, part: str) -> bytes:
    """What row ``row`` holds as ``part`` (its summary, or its chunk 0), wherever it keeps it."""
    return t.a.read(t.seqs[row], part, 0 if part == "chunk" else None)


def moved_chunk(t: Target) -> None:
    """The json row's only chunk taken out of it and held by the old row (which keeps its own in the table)."""
    t.a.hold(t.seqs["old"], "chunk", held(t, "json", "chunk"))
    t.a.hold(t.seqs["json"], "chunk", None)


def summary_nulled_and_planted(source: str) -> Tamper:
    """The json row's summary emptied, and row ``source``'s planted where an older row keeps its summary."""
    def tamper(t: Target) -> None:
        t.a.plant_summary(t.seqs["json"], held(t, source, "summary"))
        t.a.hold(t.seqs["json"], "summary", None)
    return tamper


JSON_GET, JSON_LIST = must("get", "head", row="json"), must("list", row="t")
CASES: dict[str, tuple[list[Tamper], list]] = {
    "held_chunk_flipped": ([lambda t, at=at: t.a.flip(t.seqs["json"], "chunk", at, 0) for at in (0.0, 0.5, 1.0)],
                           JSON_GET),
    "held_summary_flipped": ([lambda t: t.a.flip(t.seqs["json"], "summary")], must("get", row="json") + JSON_LIST),
    "held_chunk_nulled": ([lambda t: t.a.hold(t.seqs["json"], "chunk", None)], JSON_GET),
    "held_summary_nulled": ([lambda t: t.a.hold(t.seqs["json"], "summary", None)],
                            must("get", row="json") + JSON_LIST),
    "held_chunk_moved_to_another_row": ([moved_chunk], JSON_GET + must("get", "head", row="old")),
    "held_chunks_swapped_between_owners": ([lambda t: t.a.swap(t.seqs["json"], t.seqs["bob"], "chunk", 0, 0)],
                                           JSON_GET + must("get", "head", who="bob", row="bob")),
    "held_summaries_swapped_between_rows": ([lambda t: t.a.swap(t.seqs["json"], t.big, "summary")],
                                            must("get", row="json") + must("get") + JSON_LIST),
    # an emptied summary does not fall back to one planted where older rows keep theirs: another row's fails its
    # AAD, and the row's own (its copy from before an extend or rewrap) is no older than what the table held before
    "held_summary_nulled_another_planted": ([summary_nulled_and_planted("big"), summary_nulled_and_planted("old")],
                                            must("get", row="json") + JSON_LIST),
    # a part in both places is refused whatever the copies say: the chunk reader meets chunk 0 twice
    "chunk_held_by_a_row_of_three": ([lambda t: t.a.hold(t.big, "chunk", held(t, "big", "chunk"))],
                                     must("get", "head")),
    "older_row_chunk_also_held": ([lambda t: t.a.hold(t.seqs["old"], "chunk", held(t, "old", "chunk"))],
                                  must("get", "head", row="old")),
    "older_row_given_another_rows_summary": ([lambda t: t.a.hold(t.seqs["old"], "summary", held(t, "json",
                                                                                                 "summary"))],
                                             must("get", row="old") + JSON_LIST),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_held_part_altered_moved_or_planted_never_yields_altered_content(world, tmp_path, case):  # noqa: F811
    variants, required = CASES[case]
    check(world, tmp_path, variants, required)
