"""The model's side of the engine integration: ``Scratchpad.call_tool`` as an attacker (or a confused model)
drives it. Ids it may not read all look alike; arguments outside the schema are tool errors, never exceptions;
every result is JSON; the cap holds; faults of the store become an error result.
"""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from vault import InvalidArgument, Principal
from vault.engine import FAULT, NOT_FOUND, Scratchpad
from vault.engine.tool_args import MAX_UNITS

TEXT = "".join(f"line {i:05}\n" for i in range(2000))  # 22,000 chars
FIELDS = ["id", "mode", "n", "start", "end"]


@pytest.fixture
def rows(vault, alice, bob, clock):
    """Alice's text row in t1 (read through ``pad``), and ids she must not read from t1."""
    pad = Scratchpad(vault)
    own = pad.observe(alice, "t1", 1, "tool", TEXT)["id"]
    binary = pad.observe(alice, "t1", 2, "tool", bytes(range(256)) * 40)["id"]
    other_turn = pad.observe(alice, "t2", 1, "tool", TEXT)["id"]
    bobs = pad.observe(bob, "t1", 1, "tool", TEXT)["id"]
    expired = pad.observe(alice, "t1", 3, "tool", TEXT, ttl_seconds=5)["id"]
    clock.advance(10)
    return {"pad": pad, "own": own, "binary": binary, "other_turn": other_turn, "bobs": bobs, "expired": expired}


def json_safe(result: object) -> dict:
    assert isinstance(result, dict)
    assert json.loads(json.dumps(result, allow_nan=False)) == result
    return result


# -- ids the model may not read ------------------------------------------------------------------------
def test_other_user_other_turn_expired_malformed_and_absent_ids_get_one_identical_answer(rows, vault, alice):
    own = rows["own"]
    refused = [rows["bobs"], rows["other_turn"], rows["expired"], "0" * 32, own.upper(), own + "0", own[:-1],
               "", "../" + own, " " + own, "\u0660" * 32, "x" * 100_000]
    for pad in (rows["pad"], Scratchpad(vault)):  # with ids remembered, and as a fresh process would be
        answers = [json_safe(pad.call_tool(alice, "t1", {"id": row})) for row in refused]
        assert answers == [NOT_FOUND] * len(refused)
        assert pad.stats()["denied_reads"] == len(refused)
        assert pad.call_tool(alice, "t1", {"id": own, "n": 4})["content"] == "line"


def test_the_principal_comes_from_the_runtime_never_from_the_arguments(rows, bob):
    pad = rows["pad"]
    assert pad.call_tool(bob, "t1", {"id": rows["own"]}) == NOT_FOUND
    smuggled = pad.call_tool(bob, "t1", {"id": rows["own"], "principal": "alice", "user_id": "alice"})
    assert smuggled["error"].startswith("invalid arguments: unknown argument")
    with pytest.raises(InvalidArgument):  # a runtime bug is loud, not a tool result
        pad.call_tool("alice", "t1", {"id": rows["own"]})


def test_other_turns_are_readable_only_when_configured(rows, vault, alice, bob):
    pad = Scratchpad(vault, allow_other_turns=True)
    assert pad.call_tool(alice, "t1", {"id": rows["other_turn"], "n": 4})["content"] == "line"
    assert pad.call_tool(bob, "t1", {"id": rows["own"]}) == NOT_FOUND
    assert pad.call_tool(alice, "t1", {"id": rows["expired"]}) == NOT_FOUND


# -- arguments -----------------------------------------------------------------------------------------
BAD_ARGUMENTS = [
    None, [], 42, "not json", "[1, 2]", '{"id": 5}', b'{"id": "x"}', {}, {"id": 5}, {"id": None}, {1: "x"},
    {"id": "ID", "n": True}, {"id": "ID", "n": -1}, {"id": "ID", "n": MAX_UNITS + 1}, {"id": "ID", "n": 1.5},
    {"id": "ID", "n": float("inf")}, {"id": "ID", "n": float("nan")}, {"id": "ID", "n": "10"},
    {"id": "ID", "mode": "all"}, {"id": "ID", "mode": None}, {"id": "ID", "extra": 1}, {"id": "ID", "start": 1},
    {"id": "ID", "mode": "range", "start": 5, "end": 2}, {"id": "ID", "mode": "range", "end": [1]},
    '{"id": "ID", "n": 1' + "0" * 5000 + "}", "[" * 100_000, "x" * 70_000,
]


@pytest.mark.parametrize("arguments", BAD_ARGUMENTS, ids=range(len(BAD_ARGUMENTS)))
def test_arguments_outside_the_schema_are_a_tool_error(rows, alice, arguments):
    pad = rows["pad"]
    if isinstance(arguments, dict):
        arguments = {k: rows["own"] if v == "ID" else v for k, v in arguments.items()}
    elif isinstance(arguments, str):
        arguments = arguments.replace("ID", rows["own"])
    result = json_safe(pad.call_tool(alice, "t1", arguments))
    assert list(result) == ["error"] and result["error"].startswith("invalid arguments: ")
    assert len(result["error"]) < 300
    assert pad.stats()["tool_errors"] == 1


def test_arguments_as_a_json_string_and_integral_floats_are_accepted(rows, alice):
    pad = rows["pad"]
    result = pad.call_tool(alice, "t1", json.dumps({"id": rows["own"], "mode": "range", "start": 5.0, "end": 9}))
    assert (result["content"], result["start"], result["end"]) == (TEXT[5:9], 5, 9)


ids = st.sampled_from(["OWN", "OWN", "BOBS", "OTHER", "0" * 32]) | st.text(max_size=40)
units = st.integers(min_value=-5, max_value=30_000) | st.integers(min_value=2**52, max_value=2**60)
scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5),
                                                                                           inner, max_size=3),
                      max_leaves=8)
plausible = st.fixed_dictionaries({"id": ids}, optional={
    "mode": st.sampled_from(["head", "tail", "full", "range"]) | st.text(max_size=5),
    "n": units | st.booleans() | st.floats(), "start": units, "end": units})
known = st.sampled_from(["OWN", "BOBS", "OTHER"])
reads = st.fixed_dictionaries({"id": known}, optional={"mode": st.sampled_from(["head", "tail", "full"]), "n": units})
ranges = st.fixed_dictionaries({"id": known, "mode": st.just("range")}, optional={"start": units, "end": units})
anything = st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=8), values, max_size=6) | values


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(arguments=reads | ranges | plausible | anything, as_json=st.booleans())
def test_fuzzed_arguments_never_raise_and_always_give_json(rows, alice, arguments, as_json):
    named = {"OWN": rows["own"], "BOBS": rows["bobs"], "OTHER": rows["other_turn"]}
    if isinstance(arguments, dict) and isinstance(arguments.get("id"), str) and arguments["id"] in named:
        arguments = {**arguments, "id": named[arguments["id"]]}
    if as_json:
        try:
            arguments = json.dumps(arguments)
        except (ValueError, TypeError):
            pass
    result = json_safe(rows["pad"].call_tool(alice, "t1", arguments))
    event("read" if "content" in result else result["error"][:24])
    if "error" in result:
        assert set(result) == {"error"}
    else:
        assert result["id"] == rows["own"]  # never Bob's row, never another turn's
        assert result["content"] == TEXT[result["start"]:result["end"]]
        assert result["returned_size"] == len(result["content"]) <= rows["pad"].max_read


# -- the cap -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("arguments", "span", "truncated"), [
    ({"mode": "full"}, (0, 100), True),
    ({"mode": "head", "n": 1000}, (0, 100), True),
    ({"mode": "head", "n": 100}, (0, 100), False),
    ({"mode": "head", "n": 99}, (0, 99), False),
    ({"mode": "tail", "n": 1000}, (21_900, 22_000), True),
    ({"mode": "range", "start": 10, "end": 500}, (10, 110), True),
    ({"mode": "range", "start": 10}, (10, 110), True),
    ({"mode": "range", "start": 21_950}, (21_950, 22_000), False),
    ({"mode": "range", "start": 50_000, "end": 60_000}, (22_000, 22_000), False),
])
def test_reads_are_capped_by_the_pad(rows, vault, alice, arguments, span, truncated):
    pad = Scratchpad(vault, max_read=100)
    result = json_safe(pad.call_tool(alice, "t1", {"id": rows["own"], **arguments}))
    assert (result["start"], result["end"], result["truncated"]) == (*span, truncated)
    assert result["content"] == TEXT[span[0]:span[1]]
    assert (result["full_size"], result["returned_size"]) == (22_000, span[1] - span[0])
    assert (result["mode"], result["content_kind"]) == (arguments["mode"], "text")
    assert ("hint" in result) == truncated


def test_the_cap_is_never_more_than_the_vaults(rows, vault, alice):
    capped = Scratchpad(vault, max_read=500)
    vault.max_read = 300  # as Vault.open(max_read=300) would set it
    for pad in (Scratchpad(vault), capped):
        result = pad.call_tool(alice, "t1", {"id": rows["own"], "mode": "full"})
        assert (result["returned_size"], result["truncated"]) == (300, True)


def test_binary_slices_are_base64_and_capped_in_bytes(rows, vault, alice):
    result = Scratchpad(vault, max_read=64).call_tool(alice, "t1", {"id": rows["binary"], "mode": "full"})
    assert base64.b64decode(result["content"]) == bytes(range(64))
    assert (result["encoding"], result["unit"], result["full_size"], result["truncated"]) == (
        "base64", "bytes", 10_240, True)


# -- faults of the store -------------------------------------------------------------------------------
def test_a_tampered_row_gives_a_fault_result_not_an_exception(rows, attacker, alice):
    attacker.flip_at(attacker.seq_of(rows["own"]), "chunk", 40, chunk=0)
    pad = rows["pad"]
    assert pad.call_tool(alice, "t1", {"id": rows["own"]}) == FAULT
    assert pad.stats()["tool_errors"] == 1


def test_a_closed_vault_gives_a_fault_result(rows, vault, alice):
    vault.close()
    assert Scratchpad.call_tool(rows["pad"], alice, "t1", {"id": rows["own"]}) == FAULT
    assert rows["pad"].call_tool(Principal("carol"), "t9", {"id": "0" * 32}) == FAULT
