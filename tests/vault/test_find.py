"""``Vault.find`` and ``scratchpad_read``'s mode find, through the public API: literal matches with offsets in the
read's units and bounded lines, ``more`` when more matched, a match across a chunk boundary, the read cap on what
comes back, the one NotFound for whatever may not be read, and memory bounded by a chunk, not by the row."""

from __future__ import annotations

import base64
import json
import tracemalloc

import pytest

from keys import CHUNK_BYTES
from vault import FindResult, InvalidArgument, NotFound, Principal, Vault
from vault.engine import NOT_FOUND, Scratchpad

LOG = "".join(f"{i:06} INFO all good\n" if i % 100 else f"{i:06} ERROR disk full on /srv\n" for i in range(5000))


def offsets(result: FindResult) -> list[int]:
    return [match.offset for match in result.matches]


def test_matches_have_offsets_in_the_reads_units_and_their_lines(vault, alice):
    row = vault.put(alice, "t", 1, "log", LOG).id
    found = vault.find(alice, row, "ERROR", n=3)
    assert [match.line for match in found.matches] == [f"{i:06} ERROR disk full on /srv" for i in (0, 100, 200)]
    assert all(vault.read(alice, row, "range", start=o, end=o + 5).content == "ERROR" for o in offsets(found))
    assert found.more is True
    everything = vault.find(alice, row, "ERROR", n=100)
    assert len(everything.matches) == 50 and everything.more is False
    assert offsets(everything) == [i for i in range(len(LOG)) if LOG.startswith("ERROR", i)]


def test_case_is_ignored_only_when_asked_and_the_query_is_literal(vault, alice):
    row = vault.put(alice, "t", 1, "log", "a.b A.B a*b (x|y) error Error\n" * 10).id
    assert len(vault.find(alice, row, "a.b", n=100).matches) == 10
    assert len(vault.find(alice, row, "a.b", n=100, ignore_case=True).matches) == 20
    assert len(vault.find(alice, row, "(x|y)", n=100).matches) == 10  # no pattern: the characters themselves
    assert vault.find(alice, row, "a.*b", n=100).matches == ()
    assert len(vault.find(alice, row, "ERROR", ignore_case=True, n=100).matches) == 20


def test_a_match_across_a_chunk_boundary_is_found(vault, alice):
    for cut in range(1, 5):  # the boundary falls inside the query at each place
        text = "x" * (CHUNK_BYTES - cut) + "NEEDLE" + "y" * 1000
        row = vault.put(alice, "t", 1, "log", text).id
        found = vault.find(alice, row, "NEEDLE")
        assert offsets(found) == [CHUNK_BYTES - cut] and found.matches[0].line.startswith("x" * 80 + "NEEDLE")


def test_offsets_count_characters_not_bytes_and_json_rows_are_searched_as_read(vault, alice):
    text = ("é" * 40_000 + "ünïcode\n") * 3  # two bytes a character: chunks hold fewer characters than bytes
    row = vault.put(alice, "t", 1, "log", text).id
    assert offsets(vault.find(alice, row, "ÜNÏ", ignore_case=True)) == [40_000, 80_008, 120_016]
    listing = vault.put(alice, "t", 2, "ls", {"files": [f"/srv/f{i}.csv" for i in range(3000)]}).id
    [match] = vault.find(alice, listing, "/srv/f2999.csv").matches
    assert vault.read(alice, listing, "range", start=match.offset, end=match.offset + 14).content == "/srv/f2999.csv"


def test_binary_rows_are_searched_in_bytes_and_lines_come_back_as_base64(vault, alice):
    blob = bytes(range(256)) * 100 + b"\nmagic-marker here\n" + bytes(300)
    row = vault.put(alice, "t", 1, "dump", blob).id
    [match] = vault.find(alice, row, "MAGIC", ignore_case=True).matches
    assert match.offset == 25_601 and base64.b64decode(match.line) == b"magic-marker here"
    assert vault.find(alice, row, "MAGIC", ignore_case=True).to_dict()["encoding"] == "base64"


def test_the_lines_returned_stay_within_the_read_cap(vault_dir, keyring_backend, alice):
    with Vault.open(vault_dir / "small.db", keyring_backend=keyring_backend, max_read=100) as small:
        row = small.put(alice, "t", 1, "log", LOG).id
        found = small.find(alice, row, "ERROR", n=100)
        assert sum(len(match.line) for match in found.matches) <= 100 and found.more is True
        assert len(found.matches) == 3  # 30 characters a line


def test_whatever_may_not_be_read_is_the_one_not_found(vault, clock, alice, bob):
    row = vault.put(alice, "t", 1, "log", LOG, ttl_seconds=60).id
    for who, which, turn in ((bob, row, None), (Principal("alice"), row, "other-turn"), (alice, "x" * 32, None),
                             (alice, "0" * 32, None)):
        with pytest.raises(NotFound):
            vault.find(who, which, "ERROR", turn_id=turn)
    clock.advance(61)
    with pytest.raises(NotFound):
        vault.find(alice, row, "ERROR")


@pytest.mark.parametrize("query, n", [("", 5), ("x" * 201, 5), ("a\x00b", 5), ("ok", 0), ("ok", 101), (7, 5)])
def test_bad_queries_are_invalid_arguments(vault, alice, query, n):
    row = vault.put(alice, "t", 1, "log", LOG).id
    with pytest.raises(InvalidArgument):
        vault.find(alice, row, query, n=n)


def test_memory_stays_near_a_chunk_on_a_large_row(vault, alice):
    row = vault.put(alice, "t", 1, "log", LOG * 200).id  # about 17 MB
    tracemalloc.start()
    try:
        found = vault.find(alice, row, "not in the row at all")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert found.matches == () and found.more is False
    # the row is 260 chunks; find holds about one, a store's read may fetch a few dozen at a time (PostgreSQL: 16)
    assert peak < 48 * CHUNK_BYTES, peak


# -- the tool's mode find ---------------------------------------------------------------------------------
def test_the_tool_finds_for_the_runtimes_principal_only(vault, alice, bob):
    pad = Scratchpad(vault)
    row = pad.observe(alice, "t1", 1, "log", LOG)["id"]
    answer = pad.call_tool(alice, "t1", json.dumps({"id": row, "mode": "find", "query": "error", "ignore_case": True,
                                                    "n": 2}))
    assert [match["offset"] for match in answer["matches"]] == offsets(vault.find(alice, row, "ERROR", n=2))
    assert answer["more"] is True and answer["unit"] == "chars" and answer["mode"] == "find"
    assert pad.call_tool(bob, "t1", {"id": row, "mode": "find", "query": "ERROR"}) == NOT_FOUND
    assert len(pad.call_tool(alice, "t1", {"id": row, "mode": "find", "query": "ERROR"})["matches"]) == 20


@pytest.mark.parametrize("arguments", [{"mode": "find"}, {"mode": "find", "query": 5}, {"mode": "head", "query": "x"},
                                       {"mode": "find", "query": "x", "ignore_case": "yes"},
                                       {"mode": "find", "query": "x", "n": 0}, {"mode": "find", "query": "x",
                                                                                "start": 3}])
def test_the_tool_answers_malformed_find_calls_with_what_to_fix(vault, alice, arguments):
    pad = Scratchpad(vault)
    row = pad.observe(alice, "t1", 1, "log", LOG)["id"]
    assert pad.call_tool(alice, "t1", {"id": row, **arguments})["error"].startswith("invalid arguments: ")
