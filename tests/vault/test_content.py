"""Round trips by content kind (text, binary, json, file objects), representations, summaries and reprs."""

from __future__ import annotations

import hashlib
import io
import json
import random
from array import array

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from keys.testing import MemoryKeyring
from tests.attacks.stores import STORE
from tests.support.clock import FakeClock
from tests.support.fault_counts import FaultDouble
from vault import IntegrityError, InvalidArgument, Principal, Vault
from vault.row.chunks import chunked, content_chunks, text_pieces
from vault.storage.sqlite.schema import MAX_CHUNKS

K64 = 64 * 1024
FOUR_BYTE = "\U0001f600"  # 😀, 4 bytes of UTF-8


def put_get(vault, who, observation, turn="t"):
    rep = vault.put(who, turn, 1, "tool", observation)
    return rep, vault.get(who, rep.id)


TEXTS = {
    "ascii": "hello world\n" * 10,
    "multibyte": "é€中ß" * 100,
    "emoji": FOUR_BYTE * 50,
    "mixed": "a\u00e9\u20ac" + FOUR_BYTE + "\n\t\x00\r\n" * 20,
    "empty": "",
    "exactly_64k": "a" * K64,
    "64k_minus_1": "a" * (K64 - 1),
    "64k_plus_1": "a" * (K64 + 1),
    **{f"emoji_straddles_at_{k}": "a" * k + FOUR_BYTE * 3 + "z" for k in (K64 - 3, K64 - 2, K64 - 1)},
    "three_byte_straddles": "b" * (K64 - 1) + "€€" + "tail",
}


def test_text_round_trips_exactly_with_utf8_size(vault, alice):
    for name, text in TEXTS.items():
        rep, rec = put_get(vault, alice, text)
        assert rec.content == text and type(rec.content) is str, name
        assert rep.content_kind == rec.content_kind == "text", name
        assert rep.size_bytes == rec.size_bytes == len(text.encode("utf-8")), name
        assert vault.read(alice, rep.id, mode="head", n=0).full_size == len(text), name


@pytest.mark.parametrize("text", ["a\ud800b", "\udfff", "x\udc00\ud83dy" + FOUR_BYTE, "a" * (K64 - 1) + "\ud800" + "b"])
def test_lone_surrogates_are_stored_as_replacement_char_one_for_one(vault, alice, text):
    expected = "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)
    rep, rec = put_get(vault, alice, text)
    assert rec.content == expected
    assert len(rec.content) == len(text)
    assert rep.size_bytes == len(expected.encode("utf-8"))
    assert vault.read(alice, rep.id, mode="full").full_size == len(text)


BINARIES = {
    "bytes": lambda: bytes(range(256)) * 3,
    "bytearray": lambda: bytearray(b"\x00\xff" * 100),
    "memoryview": lambda: memoryview(b"view of bytes"),
    "memoryview_uint32": lambda: memoryview(array("I", [1, 0xDEADBEEF, 7])),
    "memoryview_non_contiguous": lambda: memoryview(bytes(range(100)))[::3],
    "memoryview_2d": lambda: memoryview(bytes(range(12))).cast("B", (3, 4)),
    "invalid_utf8": lambda: b"\xff\xfe\xc0\x80\xed\xa0\x80",
    "empty": lambda: b"",
    "multi_chunk": lambda: random.Random(1).randbytes(2 * K64 + 17),
}


@pytest.mark.parametrize("name", list(BINARIES))
def test_binary_round_trips_exact_bytes(vault, alice, name):
    observation = BINARIES[name]()
    expected = memoryview(observation).tobytes() if isinstance(observation, memoryview) else bytes(observation)
    rep, rec = put_get(vault, alice, observation)
    assert type(rec.content) is bytes and rec.content == expected
    assert rep.content_kind == "binary" and rep.size_bytes == len(expected)
    digest = hashlib.sha256(expected).hexdigest()[:16]
    assert rep.retained["sha256_prefix"] == digest
    assert digest in rep.summary and f"{len(expected):,} bytes" in rep.summary


JSONS = {
    "dict": {"a": 1, "b": "two", "c": None, "d": True, "e": 2.5},
    "list": [1, "x", None, False, -0.5],
    "nested": {"a": [{"b": [[], {}, [1, [2, [3]]]]}], "z": {"y": {"x": "deep"}}},
    "unicode_keys": {"ключ": {"鍵": [FOUR_BYTE, "é"]}, FOUR_BYTE: 1},
    "lone_surrogate_value": {"s": "a\ud800b", "t": ["\udfff"]},
    "lone_surrogate_key": {"\udc80k": 1},
    "empty_dict": {},
    "empty_list": [],
    "multi_chunk": {"results": [{"path": f"/srv/{i}/é", "size": i} for i in range(6000)]},
}


@pytest.mark.parametrize("name", list(JSONS))
def test_json_round_trips_exactly_through_get(vault, alice, name):
    value = JSONS[name]
    rep, rec = put_get(vault, alice, value)
    assert rec.content == value and type(rec.content) is type(value)
    assert rep.content_kind == rec.content_kind == "json"
    json.dumps(rep.to_dict())


def test_bytes_stream_is_binary_and_string_stream_is_text(vault, alice):
    rep, rec = put_get(vault, alice, io.BytesIO(b"\x00stream\xff"))
    assert (rep.content_kind, rec.content) == ("binary", b"\x00stream\xff")
    rep, rec = put_get(vault, alice, io.StringIO("text stream é" + FOUR_BYTE))
    assert (rep.content_kind, rec.content) == ("text", "text stream é" + FOUR_BYTE)


def test_multi_chunk_streams_round_trip(vault, alice):
    data = random.Random(2).randbytes(300 * 1024)
    assert put_get(vault, alice, io.BytesIO(data))[1].content == data
    text = ("aé€" + FOUR_BYTE + "\n") * 30_000  # ~330 KiB of UTF-8, many characters cut across pieces
    rep, rec = put_get(vault, alice, io.StringIO(text))
    assert rec.content == text and rep.size_bytes == len(text.encode())
    assert vault.read(alice, rep.id, mode="tail", n=7).content == text[-7:]


@pytest.mark.parametrize("size", [0, 1, 65535, 65536, 65537, 131072, 16 * 65536, 16 * 65536 + 1, 17 * 65536 + 9])
def test_ascii_text_is_cut_exactly_as_the_general_chunker_cuts_it(size):
    """The ASCII fast path of put must give the chunks (bytes, units, last) of the format's general chunker."""
    text = "".join(random.Random(size).choice("ab \n{}") for _ in range(min(size, 4096))) * (size // 4096 + 1)
    text = text[:size]
    fast = [(bytes(c.data), c.units, c.last) for c in content_chunks(text, text=True, max_chunks=MAX_CHUNKS)]
    general = [(bytes(c.data), c.units, c.last) for c in chunked(text_pieces(text), text=True, max_chunks=MAX_CHUNKS)]
    assert fast == general


def test_multi_chunk_ascii_text_and_json_round_trip(vault, alice):
    text = "".join(f"{i:07d} ascii line\n" for i in range(20_000))  # 380,000 chars: 6 chunks, the last short
    rep, rec = put_get(vault, alice, text)
    assert rec.content == text and rep.size_bytes == len(text)
    assert vault.read(alice, rep.id, mode="range", start=65530, end=65545).content == text[65530:65545]
    value = {"lines": text.splitlines()}
    assert put_get(vault, alice, value)[1].content == value


DAMAGE = {  # what the middle chunk becomes
    "zeroed": lambda a, seq, i: a.write(seq, "chunk", bytes(len(a.read(seq, "chunk", i))), i),  # fails its tag
    # not bytes at all: fails in the store, before any decryption
    "text": lambda a, seq, i: a.write(seq, "chunk", b"\xff\xfe", i, as_text=True),
}


def holds_a_connection(vault: Vault) -> bool:
    """Whether the store still holds a connection for a call that is over: the SQLite store's busy mark, or a
    PostgreSQL connection not yet back in its pool."""
    if STORE == "postgres":
        stats = vault._store.pool._current().get_stats()
        return stats["pool_size"] > stats["pool_available"]
    return vault._store._connections.busy()


@pytest.mark.parametrize("damage", ["zeroed", pytest.param("text", marks=pytest.mark.sqlite_only(
    "text in one chunk is a chunks column altered to text on PostgreSQL: every row's chunks, the later ones too"))])
def test_a_full_read_that_fails_midway_leaves_nothing_open(vault, alice, db_path, attacker, keyring_backend, clock,
                                                           damage):
    """Chunks are read through a cursor one at a time: a damaged middle chunk stops the read with an
    IntegrityError, and the cursor, its read snapshot and the connection's busy mark go with it, even while the
    caller still holds the exception: rows another connection commits are seen, and a checkpoint completes."""
    rep = vault.put(alice, "t", 1, "tool", "x" * (3 * K64))
    seq = attacker.seq_of(rep.id)
    DAMAGE[damage](attacker, seq, attacker.chunk_indexes()[seq][-2])
    with pytest.raises(IntegrityError) as raised:
        vault.get(alice, rep.id)
    # the exception (and its traceback) still held, yet no connection is busy
    assert raised.value is not None and not holds_a_connection(vault)
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as other:
        written = other.put(alice, "t", 2, "tool", "from another connection").id
    assert vault.get(alice, written).content == "from another connection"
    assert vault.get(alice, vault.put(alice, "t", 3, "tool", "after").id).content == "after"
    assert attacker.checkpoint()  # a checkpoint completes: nothing of the failed read holds the WAL


class FailingStream(FaultDouble):
    """Returns ``good`` full pieces, then raises (as a broken pipe or a closed file would; counted)."""

    def __init__(self, good: int) -> None:
        self.good = good
        self.arm()

    def read(self, size: int = -1) -> bytes:
        if self.good == 0:
            self.failed()
            raise OSError("stream broke")
        self.good -= 1
        return b"x" * size


@pytest.mark.parametrize("good", [0, 3])
def test_stream_that_raises_is_invalid_argument_and_stores_nothing(vault, alice, attacker, good):
    vault.put(alice, "t", 1, "tool", "already here")
    before, chunks = vault.stats(), attacker.counts()[2]
    with pytest.raises(InvalidArgument):
        vault.put(alice, "t", 2, "tool", FailingStream(good))
    after = vault.stats()
    assert (after["rows"], after["bytes"]) == (before["rows"], before["bytes"])
    assert attacker.counts()[2] == chunks
    assert [r.step_num for r in vault.list_for_turn(alice, "t")] == [1]


def test_long_text_summary_shows_beginning_and_end_but_not_middle(vault, alice):
    text = "BEGIN-MARKER " + "a" * 5000 + " MIDDLE-CANARY " + "b" * 5000 + " END-MARKER"
    rep = vault.put(alice, "t", 1, "tool", text)
    assert "BEGIN-MARKER" in rep.summary and "END-MARKER" in rep.summary
    assert "MIDDLE-CANARY" not in rep.summary and "MIDDLE-CANARY" not in json.dumps(rep.to_dict())
    assert f"{len(text):,}" in rep.summary and len(rep.summary) < 1000


def test_text_summary_end_spans_a_short_last_chunk(vault, alice):
    text = "h" * (K64 - 50) + "".join(f"<{i}>" for i in range(40))  # last chunk holds only a few chars
    rep = vault.put(alice, "t", 1, "tool", text)
    assert text[-120:] in rep.summary and text[:100] in rep.summary


def test_json_lists_show_count_and_schema_but_never_item_values(vault, alice):
    items = [{"path": f"ITEM-CANARY-{i}", "size": i, "owner": "OWNER-CANARY"} for i in range(7)]
    value = {"results": items, "entries": items[:3], "matches": ["MATCH-CANARY"] * 2, "count": 7}
    rep = vault.put(alice, "t", 1, "tool", value)
    listed = vault.list_for_turn(alice, "t")[0]
    for shown in (rep, listed):
        dumped = json.dumps(shown.to_dict(), ensure_ascii=False)
        for canary in ("ITEM-CANARY", "OWNER-CANARY", "MATCH-CANARY"):
            assert canary not in shown.summary and canary not in dumped
        assert shown.retained["results_count"] == 7 and shown.retained["entries_count"] == 3
        assert shown.retained["matches_count"] == 2 and shown.retained["count"] == 7
        assert "path: str" in shown.summary and "size: int" in shown.summary


def test_json_retains_listed_scalars_and_truncates_long_strings(vault, alice):
    value = {"truncated": True, "message": "m" * 5000, "error": None, "count": 3, "secret": "NOT-RETAINED"}
    rep = vault.put(alice, "t", 1, "tool", value)
    assert rep.retained["truncated"] is True and rep.retained["count"] == 3
    assert "error" in rep.retained and rep.retained["error"] is None
    assert rep.retained["message"].startswith("mmm") and len(rep.retained["message"]) <= 200
    assert "NOT-RETAINED" not in json.dumps(rep.to_dict())


@pytest.mark.parametrize("observation", ["short text", b"\x00\x01", {"results": [1, 2]}, [1, 2, 3]])
def test_representation_to_dict_is_json_and_matches_listing(vault, alice, observation):
    rep = vault.put(alice, "turn-x", 4, "tool", observation)
    assert json.loads(json.dumps(rep.to_dict())) == rep.to_dict()
    assert vault.list_for_turn(alice, "turn-x") == [rep]
    assert rep.id in rep.ref_hint


def test_surrogate_key_summary_is_the_same_from_put_and_from_listing(vault, alice):
    rep = vault.put(alice, "turn-s", 1, "tool", {"\ud800key": 1})
    assert vault.list_for_turn(alice, "turn-s")[0].summary == rep.summary


def test_reprs_show_no_content_summary_or_user_id(vault):
    user = Principal("USER-CANARY", actor="ACTOR-CANARY", channel="CHANNEL-CANARY")
    rep = vault.put(user, "TURN-CANARY", 1, "EXEC-CANARY", "CONTENT-CANARY " * 100)
    rec = vault.get(user, rep.id)
    res = vault.read(user, rep.id, mode="full")
    assert "CONTENT-CANARY" in rep.summary and "CONTENT-CANARY" in res.content  # the canary is really there
    for shown in (rep, rec, res, user, rec.owner, vault):
        text = repr(shown) + str(shown) + f"{shown}"
        for canary in ("USER-CANARY", "ACTOR-CANARY", "CHANNEL-CANARY", "TURN-CANARY", "EXEC-CANARY",
                       "CONTENT-CANARY"):
            assert canary not in text


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    directory = tmp_path_factory.mktemp("content")
    directory.chmod(0o700)
    with Vault.open(directory / "v.db", keyring_backend=MemoryKeyring(), clock=FakeClock()) as opened:
        yield opened


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(), data=st.binary())
def test_property_get_returns_what_was_put(shared, text, data):
    who = Principal("prop")
    expected = "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)
    assert shared.get(who, shared.put(who, "p", 0, "tool", text).id).content == expected
    assert shared.get(who, shared.put(who, "p", 0, "tool", data).id).content == data
