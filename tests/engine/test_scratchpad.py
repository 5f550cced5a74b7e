"""Engine integration (vault/engine/scratchpad.py): the offload decision at its boundary, the model's view,
references to full values, when the tool is offered, turn resume with extend_turn, counters, and the README
snippet.

The tool call itself (isolation, fuzzing, the cap) is in test_read_tool.py; a turn resumed in another process
in tests/system/test_engine_resume.py, the examples in tests/system/test_docs.py.
"""

from __future__ import annotations

import array
import io
import json

import pytest

from keys.testing import MemoryKeyring
from tests.support.readme import readme_block
from vault import SCRATCHPAD_READ_TOOL, InvalidArgument, NotFound, Principal, Vault, tool_declaration
from vault.engine import NOT_FOUND, OFFLOADED_KEYS, Scratchpad

T = 4096


@pytest.fixture
def pad(vault):
    return Scratchpad(vault, threshold_bytes=T)


def sized(kind: str, size: int):
    """An observation of ``kind`` whose serialised size is exactly ``size`` bytes."""
    if kind == "str":
        return "é" * (size // 2) + "a" * (size % 2)  # UTF-8 bytes, not characters, are what counts
    if kind == "bytes":
        return b"\x00" * size
    value = {"k": "a" * (size - 8)}  # {"k":"..."} is 8 bytes of compact JSON around the text
    assert len(json.dumps(value, separators=(",", ":")).encode()) == size
    return value


# -- the offload decision ------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["str", "bytes", "dict"])
@pytest.mark.parametrize("delta", [-1, 0, 1])
def test_observation_is_inline_just_under_the_threshold_and_stored_at_or_over_it(pad, vault, alice, kind, delta):
    observation = sized(kind, T + delta)
    seen = pad.observe(alice, "t1", 1, "tool", observation)
    stored = vault.list_for_turn(alice, "t1")
    if delta < 0:
        assert seen is observation
        assert stored == []
    else:
        assert set(seen) == OFFLOADED_KEYS
        assert [rep.to_dict() for rep in stored] == [seen]  # put happened before the context was returned
        assert vault.get(alice, seen["id"]).content == observation


def test_str_threshold_counts_utf8_bytes_not_characters(pad, alice):
    assert isinstance(pad.observe(alice, "t1", 1, "tool", "é" * (T // 2)), dict)  # T//2 chars, T bytes
    assert pad.observe(alice, "t1", 2, "tool", "a" * (T - 1)) == "a" * (T - 1)


@pytest.mark.parametrize("make", [bytearray, lambda size: memoryview(array.array("i", [0] * (size // 4)))])
def test_bytes_likes_count_their_bytes(pad, alice, make):
    assert isinstance(pad.observe(alice, "t1", 1, "tool", make(T)), dict)
    small = make(T - 4)
    assert pad.observe(alice, "t1", 2, "tool", small) is small


def test_threshold_is_the_one_setting_of_the_decision(vault, alice):
    pad = Scratchpad(vault, threshold_bytes=100)
    assert pad.observe(alice, "t1", 1, "tool", "x" * 99) == "x" * 99
    assert pad.observe(alice, "t1", 2, "tool", ["x" * 96])["content_kind"] == "json"  # ["..."] is 100 bytes


def test_streams_are_always_stored(pad, vault, alice):
    seen = pad.observe(alice, "t1", 1, "tool", io.BytesIO(b"tiny"))
    assert vault.get(alice, seen["id"]).content == b"tiny"


def test_small_json_scalars_stay_inline_and_unstorable_values_are_refused(pad, alice):
    for value in (None, True, 42, 1.5):
        assert pad.observe(alice, "t1", 1, "tool", value) is value
    for bad in ({1: "int key"}, {"x": float("nan")}, (1, 2), {"x": {1, 2}}, 10 ** 4100):
        with pytest.raises(InvalidArgument):
            pad.observe(alice, "t1", 1, "tool", bad)


def test_small_dict_shaped_like_a_representation_is_stored_not_mistaken_for_one(pad, alice):
    lookalike = dict.fromkeys(OFFLOADED_KEYS, 0) | {"id": "0" * 32}
    seen = pad.observe(alice, "t1", 1, "tool", lookalike)
    assert seen["id"] != lookalike["id"]
    assert pad.full_value(alice, "t1", seen) == lookalike


def test_runtime_arguments_are_checked_for_inline_observations_too(pad, alice):
    for call in (lambda: pad.observe("alice", "t1", 1, "tool", "x"), lambda: pad.observe(alice, "", 1, "tool", "x"),
                 lambda: pad.observe(alice, "t1", -1, "tool", "x"), lambda: pad.observe(alice, "t1", 1, "", "x")):
        with pytest.raises(InvalidArgument):
            call()


@pytest.mark.parametrize("settings", [{"threshold_bytes": 0}, {"threshold_bytes": True}, {"max_read": 0},
                                      {"max_read": 16001}, {"allow_other_turns": 1}, {"ttl_seconds": -1},
                                      {"metrics": "log"}])
def test_bad_settings_are_refused(vault, settings):
    with pytest.raises(InvalidArgument):
        Scratchpad(vault, **settings)


# -- full values behind references ---------------------------------------------------------------------
@pytest.mark.parametrize("observation", ["x" * 5000, b"\x01" * 5000, {"results": list(range(2000))}, "small"])
def test_full_value_gives_back_the_observation_inline_or_stored(pad, alice, observation):
    seen = pad.observe(alice, "t1", 1, "tool", observation)
    assert pad.full_value(alice, "t1", seen) == observation


def test_full_value_is_only_for_the_owner_in_the_same_turn(vault, alice, bob):
    seen = Scratchpad(vault).observe(alice, "t1", 1, "tool", "x" * 5000)
    fresh = Scratchpad(vault)  # nothing remembered: membership comes from the vault
    for who, turn in ((bob, "t1"), (alice, "t2")):
        with pytest.raises(NotFound):
            fresh.full_value(who, turn, seen)
    assert Scratchpad(vault, allow_other_turns=True).full_value(alice, "t2", seen) == "x" * 5000
    with pytest.raises(NotFound):
        Scratchpad(vault, allow_other_turns=True).full_value(bob, "t1", seen)


def test_step_references_resolve_to_full_values(pad, alice):
    listing = {"results": [{"path": f"/f{i}", "size": i} for i in range(500)], "count": 500}
    steps = {1: pad.observe(alice, "t1", 1, "fs.list", listing), 2: pad.observe(alice, "t1", 2, "calc", {"n": 7})}
    assert "results" not in steps[1]  # the model sees a representation ...
    assert pad.resolve(alice, "t1", steps, "${step1.results}") == listing["results"]  # ... the engine the value
    assert pad.resolve(alice, "t1", steps, "${step1.results.499.path}") == "/f499"
    assert pad.resolve(alice, "t1", steps, "${step2.n}") == 7
    assert pad.resolve(alice, "t1", steps, "${step1}") == listing
    for bad in ("${step3}", "${step1.nope}", "${step1.results.500}", "step1", "${step1..x}", 7):
        with pytest.raises(InvalidArgument):
            pad.resolve(alice, "t1", steps, bad)


def test_references_with_non_ascii_digits_or_huge_numbers_are_invalid_arguments(pad, alice):
    """``str.isdigit()`` accepts superscripts and circled digits that ``int()`` refuses, and ``int()`` refuses
    more than 4,300 digits: each is the model's malformed reference, an InvalidArgument, never a ValueError."""
    listing = {"results": [{"path": f"/f{i}"} for i in range(500)]}
    steps = {1: pad.observe(alice, "t1", 1, "fs.list", listing)}
    for bad in ("${step1.results.\u00b2}", "${step1.results.\u2460}", "${step1.results.\u0663}",
                "${step" + "1" * 4301 + "}", "${step1.results." + "9" * 4301 + "}", "${step\u0661}"):
        with pytest.raises(InvalidArgument):
            pad.resolve(alice, "t1", steps, bad)


# -- when the tool is offered --------------------------------------------------------------------------
def test_tool_is_offered_only_to_a_principal_with_rows_in_the_turn(pad, alice, bob):
    assert pad.tools(alice, "t1") == []
    pad.observe(alice, "t1", 1, "tool", "small")
    assert pad.tools(alice, "t1") == []  # inline only: nothing to read
    pad.observe(alice, "t1", 2, "tool", "x" * T)
    assert pad.tools(alice, "t1") == [SCRATCHPAD_READ_TOOL]
    assert pad.tools(bob, "t1") == []
    assert pad.tools(alice, "t2") == []
    assert pad.tools(Principal("alice", actor="other", channel="cli"), "t1") == [SCRATCHPAD_READ_TOOL]
    assert pad.tools(alice, "t1", "openai") == [tool_declaration("openai")]


def test_tool_is_withdrawn_when_the_rows_expire_or_are_deleted(pad, vault, alice, clock):
    seen = pad.observe(alice, "t1", 1, "tool", "x" * T, ttl_seconds=60)
    pad.observe(alice, "t2", 1, "tool", "y" * T, ttl_seconds=60)
    vault.delete(alice, seen["id"])
    assert pad.tools(alice, "t1") == []
    assert pad.tools(alice, "t2") == [SCRATCHPAD_READ_TOOL]
    clock.advance(60)
    assert pad.tools(alice, "t2") == []
    assert vault.gc() == 1
    assert pad.tools(alice, "t2") == [] and pad.call_tool(alice, "t2", {"id": seen["id"]}) == NOT_FOUND


# -- resume and extend_turn ----------------------------------------------------------------------------
def test_extend_turn_gives_the_tool_back_after_expiry_would_have_hidden_it(db_path, keyring_backend, clock, alice):
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as first:
        pad = Scratchpad(first, ttl_seconds=60)
        kept = pad.observe(alice, "kept", 1, "tool", "x" * T)
        pad.observe(alice, "lapsed", 1, "tool", "y" * T)
    clock.advance(50)
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as second:  # the resumed dialog
        pad = Scratchpad(second)
        assert pad.tools(alice, "kept") == [SCRATCHPAD_READ_TOOL]
        assert second.extend_turn(alice, "kept", 3600) == 1
        clock.advance(20)  # past the original expiry
        assert pad.tools(alice, "kept") == [SCRATCHPAD_READ_TOOL]
        assert pad.call_tool(alice, "kept", {"id": kept["id"], "n": 3})["content"] == "xxx"
        assert pad.tools(alice, "lapsed") == []
        assert second.extend_turn(alice, "lapsed", 3600) == 0  # expired rows stay expired
        assert pad.tools(alice, "lapsed") == []


def test_resume_extends_the_turn_and_returns_what_the_model_saw(pad, alice, bob, clock):
    seen = [pad.observe(alice, "t1", n, "tool", "x" * (T + n), ttl_seconds=60) for n in (1, 2)]
    clock.advance(59)
    resumed = pad.resume(alice, "t1", ttl_seconds=600)
    assert [c["id"] for c in resumed] == [c["id"] for c in seen]
    assert [c["expires_at"] for c in resumed] == [clock.now + 600] * 2
    assert pad.resume(bob, "t1") == []
    clock.advance(500)
    assert pad.tools(alice, "t1") == [SCRATCHPAD_READ_TOOL]


# -- counters ------------------------------------------------------------------------------------------
def test_counters_count_without_content_and_feed_the_metrics_hook(vault, alice, bob):
    events: list[tuple[str, int]] = []
    pad = Scratchpad(vault, metrics=lambda name, n: events.append((name, n)))
    big = pad.observe(alice, "t1", 1, "tool", "CANARY" * 1000)
    pad.observe(alice, "t1", 2, "tool", "CANARY small")
    pad.call_tool(alice, "t1", {"id": big["id"]})
    pad.call_tool(bob, "t1", {"id": big["id"]})
    pad.call_tool(alice, "t1", {"id": big["id"], "n": "all"})
    expected = {"offloaded_observations": 1, "offloaded_bytes": 6000, "inline_observations": 1, "tool_reads": 1,
                "denied_reads": 1, "tool_errors": 1}
    assert pad.stats() == expected
    totals = dict.fromkeys(expected, 0)
    for name, n in events:
        totals[name] += n
    assert totals == expected
    assert "CANARY" not in repr(events) + repr(pad.stats()) and big["id"] not in repr(events)


def test_a_failing_metrics_hook_breaks_nothing(vault, alice):
    def broken(name: str, n: int) -> None:
        raise RuntimeError("metrics sink down")

    pad = Scratchpad(vault, metrics=broken)
    seen = pad.observe(alice, "t1", 1, "tool", "x" * T)
    assert pad.call_tool(alice, "t1", {"id": seen["id"], "n": 1})["content"] == "x"
    assert pad.call_tool(alice, "t1", {"id": "0" * 32}) == NOT_FOUND


# -- the README snippet --------------------------------------------------------------------------------
SNIPPET = readme_block("## Engine integration")  # the README's snippet, run as written


def test_readme_snippet_is_at_most_30_lines():
    assert len(SNIPPET.strip().splitlines()) <= 30


def test_readme_snippet_runs(db_path, capsys):
    opened = "Vault.open()"
    assert SNIPPET.count(opened) == 1
    code = SNIPPET.replace(opened, f"Vault.open({str(db_path)!r}, keyring_backend=MemoryKeyring())")
    exec(compile(code, "README-engine", "exec"), {"__name__": "readme", "MemoryKeyring": MemoryKeyring})
    assert "<p>figures</p> 14985 False" in capsys.readouterr().out


@pytest.mark.real_keyring
def test_readme_snippet_runs_against_the_os_keyring(real_keyring, tmp_path, monkeypatch):
    data_home = tmp_path / "data"
    data_home.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_DATA_HOME", str(data_home))
    exec(compile(SNIPPET, "README-engine", "exec"), {"__name__": "readme"})
    assert (data_home / "scratchvault" / "scratchpad.db").exists()
