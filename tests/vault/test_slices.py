"""Every read mode and range edge, chunk boundaries, the max_read cap, and read-argument validation."""

from __future__ import annotations

import base64
import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from keys.testing import MemoryKeyring
from tests.support.clock import FakeClock
from vault import InvalidArgument, NotFound, Principal, Vault

K64 = 64 * 1024
CAP = 100
MIXED = "aé€\U0001f600"  # 1 + 2 + 3 + 4 bytes


def units(kind: str, observation):
    """The original content in the row's units: a str for text/json, bytes for binary."""
    return json.dumps(observation, ensure_ascii=False) if kind == "json" else observation


def decoded(result):
    return base64.b64decode(result.content, validate=True) if result.content_kind == "binary" else result.content


SMALL = {
    "text": "0123456789abcdefghij" + MIXED * 5,
    "binary": bytes(range(40)),
    "json": {"k": "vé", "n": [1, 2, 3], "s": "\U0001f600"},
}


@pytest.fixture
def open_vault(vault_dir, keyring_backend, clock):
    opened = []

    def make(name: str, max_read: int) -> Vault:
        opened.append(Vault.open(vault_dir / name, keyring_backend=keyring_backend, clock=clock, max_read=max_read))
        return opened[-1]

    yield make
    for each in opened:
        each.close()


@pytest.mark.parametrize("kind", list(SMALL))
def test_modes_match_python_slicing(vault, alice, kind):
    original = units(kind, SMALL[kind])
    size = len(original)
    rid = vault.put(alice, "t", 1, "tool", SMALL[kind]).id
    cases = [
        (dict(mode="full"), 0, size), (dict(mode="head", n=7), 0, 7), (dict(mode="tail", n=7), size - 7, size),
        (dict(mode="range", start=3, end=11), 3, 11), (dict(mode="range", start=5), 5, size),
        (dict(mode="range", end=4), 0, 4), (dict(mode="range"), 0, size), (dict(), 0, size),
        (dict(mode="head", n=0), 0, 0), (dict(mode="tail", n=0), size, size),
        (dict(mode="head", n=size + 50), 0, size), (dict(mode="tail", n=10**30), 0, size),
        (dict(mode="range", start=6, end=6), 6, 6), (dict(mode="range", start=2, end=size + 999), 2, size),
        (dict(mode="range", start=size + 5, end=size + 9), size, size), (dict(mode="range", start=10**20), size, size),
    ]
    for arguments, start, end in cases:
        result = vault.read(alice, rid, **arguments)
        assert decoded(result) == original[start:end], arguments
        assert (result.start, result.end, result.returned_size) == (start, end, end - start), arguments
        assert (result.full_size, result.truncated) == (size, False), arguments
        assert result.mode == arguments.get("mode", "head") and result.content_kind == kind


def test_read_result_to_dict_names_encoding_and_unit(vault, alice):
    binary = vault.read(alice, vault.put(alice, "t", 1, "tool", b"\xff\x00").id, mode="full").to_dict()
    text = vault.read(alice, vault.put(alice, "t", 2, "tool", "é").id, mode="full").to_dict()
    assert (binary["encoding"], binary["unit"], binary["content"]) == ("base64", "bytes", "/wA=")
    assert (text["encoding"], text["unit"], text["content"]) == ("utf-8", "chars", "é")
    json.dumps(binary), json.dumps(text)


@pytest.fixture
def big_binary(vault, alice):
    data = random.Random(7).randbytes(2 * K64 + 1000)
    return data, vault.put(alice, "t", 1, "tool", data).id


EDGES = [K64 - 1, K64, K64 + 1, 2 * K64 - 1, 2 * K64, 2 * K64 + 1, 2 * K64 + 500]


def test_binary_ranges_around_chunk_edges_return_exact_bytes(vault, alice, big_binary):
    data, rid = big_binary
    for edge in EDGES:
        pairs = [(edge - 3, edge + 3), (edge, edge + 1), (edge - 1, edge), (edge, edge), (edge - 15000, edge)]
        for start, end in pairs:
            result = vault.read(alice, rid, mode="range", start=start, end=end)
            assert decoded(result) == data[start:end], (start, end)
            assert result.returned_size == len(data[start:end])
    assert decoded(vault.read(alice, rid, mode="tail", n=1001)) == data[-1001:]
    assert decoded(vault.read(alice, rid, mode="head", n=K64 + 1)) == data[:16000]  # default cap 16000


def test_range_across_three_chunks_with_large_cap(open_vault, alice):
    data = random.Random(8).randbytes(2 * K64 + 1000)
    wide = open_vault("wide.db", 10**6)
    rid = wide.put(alice, "t", 1, "tool", data).id
    assert decoded(wide.read(alice, rid, mode="range", start=K64 - 10, end=2 * K64 + 10)) == data[K64 - 10:2 * K64 + 10]
    assert decoded(wide.read(alice, rid, mode="full")) == data
    text = MIXED * 30_000  # 300,000 bytes of UTF-8 in 5 chunks
    tid = wide.put(alice, "t", 2, "tool", text).id
    assert wide.read(alice, tid, mode="full").content == text
    assert wide.read(alice, tid, mode="range", start=5, end=110_000).content == text[5:110_000]


def char_offsets_at_byte_boundaries(text: str, byte_limit: int = K64) -> list[int]:
    """Character offsets where a 64 KiB UTF-8 chunker (cutting before a split character) starts a new chunk."""
    offsets, used = [], 0
    for index, char in enumerate(text):
        width = len(char.encode())
        if used + width > byte_limit:
            offsets.append(index)
            used = 0
        used += width
    return offsets


def test_text_ranges_around_chunk_edges_match_python_slicing(vault, alice):
    rng = random.Random(9)
    text = "".join(rng.choice(MIXED) for _ in range(60_000))  # ~150 KB: three chunks
    rid = vault.put(alice, "t", 1, "tool", text).id
    edges = char_offsets_at_byte_boundaries(text)
    assert len(edges) == 2
    for edge in edges:
        for start in range(edge - 3, edge + 4):
            for end in (start, start + 1, edge + 5, start + 2000):
                result = vault.read(alice, rid, mode="range", start=start, end=end)
                assert result.content == text[start:end], (edge, start, end)
    assert vault.read(alice, rid, mode="tail", n=3).content == text[-3:]
    assert vault.read(alice, rid, mode="full").full_size == len(text)


@pytest.mark.parametrize("kind", ["text", "binary"])
def test_max_read_caps_every_mode_keeping_the_right_end(open_vault, alice, kind):
    small = open_vault("small.db", CAP)
    original = "".join(chr(0x41 + i % 26) + "é" for i in range(500)) if kind == "text" else bytes(range(256)) * 4
    size = len(original)
    rid = small.put(alice, "t", 1, "tool", original).id
    expectations = [
        (dict(mode="full"), original[:CAP], 0, True), (dict(mode="tail", n=300), original[-CAP:], size - CAP, True),
        (dict(mode="range", start=250, end=900), original[250:350], 250, True),
        (dict(mode="head", n=CAP + 1), original[:CAP], 0, True), (dict(mode="head", n=CAP), original[:CAP], 0, False),
        (dict(mode="range", start=size - 40), original[-40:], size - 40, False),
    ]
    for arguments, expected, start, truncated in expectations:
        result = small.read(alice, rid, **arguments)
        assert decoded(result) == expected, arguments
        assert (result.start, result.end, result.truncated) == (start, start + len(expected), truncated), arguments
        assert result.returned_size == len(expected) <= CAP and result.full_size == size


def test_head_beyond_cap_on_short_content_is_not_truncated(open_vault, alice):
    small = open_vault("small.db", CAP)
    result = small.read(alice, small.put(alice, "t", 1, "tool", "x" * 40).id, mode="head", n=CAP * 5)
    assert (result.content, result.truncated, result.returned_size) == ("x" * 40, False, 40)


@pytest.fixture(scope="module")
def capped(tmp_path_factory):
    directory = tmp_path_factory.mktemp("slices")
    directory.chmod(0o700)
    rng = random.Random(10)
    text = "".join(rng.choice(MIXED + "\n") for _ in range(70_000))
    who = Principal("slicer")
    with Vault.open(directory / "capped.db", keyring_backend=MemoryKeyring(), clock=FakeClock(), max_read=CAP) as v:
        yield v, who, v.put(who, "t", 1, "tool", text).id, text


def model(text: str, mode: str, n: int, start: int | None, end: int | None) -> tuple[str, int, int, bool]:
    size = len(text)
    if mode == "full":
        first, last = 0, size
    elif mode == "head":
        first, last = 0, min(n, size)
    elif mode == "tail":
        first, last = max(size - n, 0), size
    else:
        first = min(start or 0, size)
        last = size if end is None else min(end, size)
    cut = last - first > CAP
    if cut:
        first, last = (last - CAP, last) if mode == "tail" else (first, first + CAP)
    return text[first:last], first, last, cut


def position(data, edges: list[int], size: int) -> int | None:
    near_edge = st.sampled_from(edges).flatmap(lambda edge: st.integers(edge - 3, edge + 3))
    return data.draw(st.one_of(st.none(), st.integers(0, size + 100), near_edge, st.just(10**18)))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mode=st.sampled_from(["full", "head", "tail", "range"]), n=st.integers(0, 80_000) | st.just(10**12),
       data=st.data())
def test_property_no_read_exceeds_max_read_and_matches_model(capped, mode, n, data):
    vault, who, rid, text = capped
    edges = char_offsets_at_byte_boundaries(text)
    start = end = None
    if mode == "range":
        start, end = position(data, edges, len(text)), position(data, edges, len(text))
        if start is not None and end is not None and end < start:
            start, end = end, start
    result = vault.read(who, rid, mode=mode, n=n, start=start, end=end)
    content, first, last, cut = model(text, mode, n, start, end)
    assert len(result.content) <= CAP and result.returned_size <= CAP
    assert result.content == content
    assert (result.start, result.end, result.truncated, result.full_size) == (first, last, cut, len(text))


BAD_READS = [
    dict(mode="head", n=-1), dict(mode="tail", n=-5), dict(mode="range", start=-1), dict(mode="range", end=-1),
    dict(mode="range", start=5, end=4), dict(mode="bogus"), dict(mode="HEAD"), dict(mode=None), dict(mode=b"head"),
    dict(n=True), dict(n=False), dict(n=2.0), dict(n="5"), dict(n=None), dict(mode="range", start=1.0),
    dict(mode="range", end=True), dict(mode="head", start=1), dict(mode="tail", end=3),
    dict(mode="full", start=0, end=1), dict(mode="head", start=0),
]


def test_bad_read_arguments_are_invalid_argument(vault, alice, bob):
    rid = vault.put(alice, "t", 1, "tool", "some text").id
    for arguments in BAD_READS:
        for who in (alice, bob):  # validated before the ownership check: same answer for owner and stranger
            try:
                vault.read(who, rid, **arguments)
            except InvalidArgument:
                continue
            pytest.fail(f"{arguments!r} was accepted")


def test_read_of_another_users_row_is_not_found_for_every_mode(vault, alice, bob):
    rid = vault.put(alice, "t", 1, "tool", "private").id
    for arguments in (dict(mode="full"), dict(mode="tail", n=1), dict(mode="range", start=0, end=3)):
        with pytest.raises(NotFound):
            vault.read(bob, rid, **arguments)
