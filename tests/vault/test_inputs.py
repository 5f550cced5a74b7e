"""Bad inputs to every public method raise only the documented VaultError, and nothing is stored."""

from __future__ import annotations

import contextlib
import signal
from array import array

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from keys.testing import MemoryKeyring
from tests.support.clock import FakeClock
from tests.support.fuzzing import FUZZ, WIDE
from vault import InvalidArgument, NotFound, Principal, Vault, VaultError
from vault.engine import Scratchpad

DAY = 24 * 3600
BAD_IDENTIFIERS = ["", "a\x00b", "\x00", "x\ud800", "\udfff", 5, None, b"alice", ["a"], "x" * 1025, "é" * 513]


def rows(vault) -> int:
    return vault.stats()["rows"]


def refused(error: type[Exception], call, case) -> None:
    """``call()`` must raise ``error``; any other outcome fails, naming the case."""
    try:
        call()
    except error:
        return
    except Exception as other:
        pytest.fail(f"{case!r}: raised {type(other).__name__} instead of {error.__name__}")
    pytest.fail(f"{case!r}: did not raise {error.__name__}")


@pytest.mark.parametrize("bad", BAD_IDENTIFIERS, ids=repr)
def test_bad_identifiers_are_invalid_argument_everywhere_and_store_nothing(vault, alice, bad):
    with pytest.raises(InvalidArgument):
        Principal(bad)
    with pytest.raises(InvalidArgument):
        Principal("ok", actor=bad if bad is not None else 5)
    with pytest.raises(InvalidArgument):
        Principal("ok", channel=bad if bad is not None else 5.0)
    for arguments in [(bad, 1, "tool"), ("turn", 1, bad)]:
        with pytest.raises(InvalidArgument):
            vault.put(alice, *arguments, "observation")
    with pytest.raises(InvalidArgument):
        vault.list_for_turn(alice, bad)
    assert rows(vault) == 0


def test_identifier_of_exactly_1024_utf8_bytes_is_accepted(vault):
    who = Principal("é" * 512, actor="a" * 1024)
    rep = vault.put(who, "t" * 1024, 0, "€" * 341, "x")
    assert vault.get(who, rep.id).owner == who


@pytest.mark.parametrize("other", ["alice", "e\u0301", "\u00e9 ", " \u00e9"])
def test_owners_are_compared_exactly(vault, other):
    owner = Principal("Alice" if other == "alice" else "\u00e9")  # NFC é vs NFD, trailing/leading space
    rid = vault.put(owner, "turn", 1, "tool", "mine").id
    with pytest.raises(NotFound):
        vault.get(Principal(other), rid)
    assert vault.list_for_turn(Principal(other), "turn") == []
    assert vault.get(owner, rid).content == "mine"


def test_turns_are_compared_exactly(vault, alice):
    turns = ["Turn", "turn", "turn ", "\u00e9", "e\u0301"]
    for step, turn in enumerate(turns):
        vault.put(alice, turn, step, "tool", turn)
    for step, turn in enumerate(turns):
        assert [rep.step_num for rep in vault.list_for_turn(alice, turn)] == [step]


def test_bad_step_num_is_invalid_argument(vault, alice):
    for step in [-1, True, False, 1.0, 2**53, 10**100, "1", None]:
        refused(InvalidArgument, lambda: vault.put(alice, "t", step, "tool", "x"), step)
    assert rows(vault) == 0


def test_step_num_limits_are_accepted(vault, alice):
    assert [vault.put(alice, "t", s, "tool", "x").step_num for s in (0, 2**53 - 1)] == [0, 2**53 - 1]


def test_bad_ttl_is_invalid_argument(vault, alice):
    for ttl in [0, 0.0, -1, -1e-9, float("nan"), float("inf"), float("-inf"), True, False, "10", None,
                30 * DAY + 1, 30 * DAY + 0.001, 10**400, [60]]:
        refused(InvalidArgument, lambda: vault.put(alice, "t", 1, "tool", "x", ttl_seconds=ttl), ttl)
    assert rows(vault) == 0


def test_ttl_of_exactly_thirty_days_is_accepted_and_max_is_configurable(vault, alice, vault_dir, keyring_backend):
    for ttl in (30 * DAY, float(30 * DAY)):
        rep = vault.put(alice, "t", 1, "tool", "x", ttl_seconds=ttl)
        assert rep.expires_at - rep.created_at == 30 * DAY
    with Vault.open(vault_dir / "short.db", keyring_backend=keyring_backend, max_ttl_seconds=60) as short:
        assert short.put(alice, "t", 1, "tool", "x", ttl_seconds=60).expires_at > 0
        for ttl in (61, 60.5, 30 * DAY):
            with pytest.raises(InvalidArgument):
                short.put(alice, "t", 1, "tool", "x", ttl_seconds=ttl)
        assert rows(short) == 1


def test_a_ttl_above_the_limit_names_the_limit_in_whole_seconds_and_days(vault, alice, vault_dir, keyring_backend):
    with pytest.raises(InvalidArgument) as too_long:
        vault.put(alice, "t", 1, "tool", "x", ttl_seconds=30 * DAY + 1)
    assert str(too_long.value) == "ttl_seconds must be at most 2592000 seconds (30 days)"
    with pytest.raises(InvalidArgument) as too_long:
        Scratchpad(vault, ttl_seconds=float(31 * DAY))
    assert str(too_long.value) == "ttl_seconds must be at most 2592000 seconds (30 days)"
    with Vault.open(vault_dir / "short.db", keyring_backend=keyring_backend, max_ttl_seconds=90.5) as short:
        with pytest.raises(InvalidArgument) as too_long:
            short.put(alice, "t", 1, "tool", "x", ttl_seconds=91)
    assert str(too_long.value) == "ttl_seconds must be at most 90.5 seconds"


def nested(depth: int):
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


def self_referencing():
    loop: list = []
    loop.append(loop)
    return {"a": loop}


BAD_OBSERVATIONS = {
    "int": 5, "none": None, "set": {1, 2}, "object": object(), "tuple": (1, 2), "float": 1.5,
    "non_str_key": {1: "a"}, "tuple_key": {("a",): 1}, "nan_inside": {"a": [float("nan")]},
    "inf_inside": [1, float("inf")], "set_inside": {"a": {1}}, "bytes_inside": [b"x"], "object_inside": [object()],
    "nested_10000": nested(10_000), "self_reference": self_referencing(), "array": array("b", b"xy"),
    "stream_of_str_not_textio": type("Reader", (), {"read": lambda self, n=-1: "text"})(),
}


def test_bad_observations_are_invalid_argument_and_store_nothing(vault, alice, attacker):
    for name, observation in BAD_OBSERVATIONS.items():
        refused(InvalidArgument, lambda: vault.put(alice, "t", 1, "tool", observation), name)
    assert rows(vault) == 0
    assert attacker.counts()[2] == 0  # no chunk either


def test_json_with_huge_int_is_invalid_argument_or_round_trips(vault, alice):
    try:
        assert vault.get(alice, vault.put(alice, "t", 1, "tool", {"n": 10**5000}).id).content == {"n": 10**5000}
    except InvalidArgument:
        assert rows(vault) == 0


@contextlib.contextmanager
def within(seconds: float):
    """Fail the test (instead of hanging the suite) if the block runs longer than ``seconds``."""
    def expired(*_):
        raise TimeoutError(f"took longer than {seconds} s")
    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def shared_levels(levels: int, make) -> object:
    """``levels`` containers, each holding the one below twice: 2**levels leaves once written out as JSON (what
    YAML anchors produce)."""
    value: object = []
    for _ in range(levels):
        value = make(value)
    return value


def test_json_with_shared_references_or_cycles_is_refused_in_time_linear_in_its_objects(vault, alice):
    lists = shared_levels(60, lambda below: [below, below])
    objects = shared_levels(61, lambda below: {"left": below, "right": below})
    looped: list = []
    looped.extend([looped, looped])
    megabyte = "x" * 2**20
    chains = [[]]
    for _ in range(4):  # each chain 200 deep over the one before: first met at depth 1, written out 800 deep
        chain = chains[-1]
        for _ in range(200):
            chain = [chain]
        chains.append(chain)
    pad = Scratchpad(vault)
    with within(10):
        for observation in (lists, objects, looped, {"deep": looped}, [megabyte] * 2000, chains[::-1]):
            refused(InvalidArgument, lambda o=observation: vault.put(alice, "t", 1, "tool", o), "shared")
            refused(InvalidArgument, lambda o=observation: pad.observe(alice, "t", 1, "tool", o), "shared")
    assert rows(vault) == 0
    shared_leaf = {"v": 1}
    fine = vault.put(alice, "t", 1, "tool", {"a": shared_leaf, "b": [shared_leaf] * 3})  # sharing that stays small
    assert vault.get(alice, fine.id).content == {"a": {"v": 1}, "b": [{"v": 1}] * 3}


def test_released_memoryview_is_invalid_argument(vault, alice):
    view = memoryview(b"gone")
    view.release()
    with pytest.raises(InvalidArgument):
        vault.put(alice, "t", 1, "tool", view)


def test_stream_returning_odd_buffer_is_invalid_argument_or_stored_exactly(vault, alice):
    class Odd:
        done = False

        def read(self, size=-1):
            self.done, was_done = True, self.done
            return b"" if was_done else memoryview(array("I", [1, 2, 3, 4]))[::2]

    try:
        assert vault.get(alice, vault.put(alice, "t", 1, "tool", Odd()).id).content == array("I", [1, 3]).tobytes()
    except InvalidArgument:
        assert rows(vault) == 0


def test_non_principal_is_invalid_argument_for_every_method(vault, alice):
    rid = vault.put(alice, "t", 1, "tool", "x").id
    for who in ["alice", None, {"user_id": "alice"}, ("alice",), 5, Principal]:
        calls = {"put": lambda: vault.put(who, "t", 1, "tool", "x"), "get": lambda: vault.get(who, rid),
                 "read": lambda: vault.read(who, rid), "delete": lambda: vault.delete(who, rid),
                 "list_for_turn": lambda: vault.list_for_turn(who, "t")}
        for name, call in calls.items():
            refused(InvalidArgument, call, (name, who))
    assert vault.get(alice, rid).content == "x" and rows(vault) == 1


def test_malformed_str_ids_are_not_found_and_non_str_ids_invalid_argument(vault, alice):
    rid = vault.put(alice, "t", 1, "tool", "x").id
    malformed = ["", "x", rid.upper(), rid + "\n", " " + rid, rid[:-1], rid + "0", "'; DROP TABLE rows; --",
                 "\u0661" * 32, rid[:-1] + "\x00", "\ud800" * 32]
    for bad in malformed:
        for call in (vault.get, vault.read, vault.delete):
            with pytest.raises(NotFound) as caught:
                call(alice, bad)
            assert str(caught.value) == NotFound.MESSAGE
    for bad in (None, 5, bytes.fromhex(rid), [rid], rid.encode()):
        for call in (vault.get, vault.read, vault.delete):
            refused(InvalidArgument, lambda: call(alice, bad), (call.__name__, bad))
    assert vault.get(alice, rid).content == "x"


BAD_SETTINGS = [dict(max_read=0), dict(max_read=-1), dict(max_read=True), dict(max_read=1.5), dict(max_read=10**7 + 1),
                dict(max_ttl_seconds=0), dict(max_ttl_seconds=-1), dict(max_ttl_seconds=float("nan")),
                dict(max_ttl_seconds=float("inf")), dict(max_ttl_seconds=True), dict(max_ttl_seconds="60"),
                dict(key_cache_seconds=0), dict(key_cache_size=0), dict(key_cache_size=2.0), dict(clock=5)]


def test_open_with_bad_settings_is_invalid_argument_before_creating_anything(vault_dir, keyring_backend):
    for bad in BAD_SETTINGS:
        refused(InvalidArgument, lambda: Vault.open(vault_dir / "s.db", keyring_backend=keyring_backend, **bad), bad)
    assert not (vault_dir / "s.db").exists() and keyring_backend.secrets == {}


def test_open_with_a_keyring_backend_of_wrong_type_is_refused_before_creating_anything(vault_dir):
    for backend in ("file", 1, object()):
        with pytest.raises(InvalidArgument):
            Vault.open(vault_dir / "s.db", keyring_backend=backend)
    assert not (vault_dir / "s.db").exists()


def test_open_with_bad_path_is_invalid_argument(vault_dir, keyring_backend, monkeypatch):
    monkeypatch.chdir(vault_dir)
    for path in [123, b"/tmp/x.db", ":memory:", "", "file:x.db?mode=memory", "a\x00b", 1.5, ["p"]]:
        refused(InvalidArgument, lambda: Vault.open(path, keyring_backend=keyring_backend), path)
    assert list(vault_dir.iterdir()) == []


def test_open_with_non_utf8_file_name_is_a_vault_error_or_works(vault_dir, keyring_backend, alice):
    try:
        with Vault.open(vault_dir / "\udcff.db", keyring_backend=keyring_backend) as opened:
            assert opened.get(alice, opened.put(alice, "t", 1, "tool", "x").id).content == "x"
    except VaultError:
        assert list(vault_dir.iterdir()) == []


# -- fuzzing: whatever a caller (or a model, through the tool) passes, only VaultError comes out --------------
def only_vault_errors(call, vault) -> None:
    before = rows(vault)
    try:
        call()
    except VaultError:
        assert rows(vault) == before
    # anything else (TypeError, RecursionError, a driver's error, OverflowError...) propagates and fails the test


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory):
    directory = tmp_path_factory.mktemp("fuzz")
    directory.chmod(0o700)
    with Vault.open(directory / "f.db", keyring_backend=MemoryKeyring(), clock=FakeClock()) as opened:
        owner = Principal("fuzz-owner")
        yield opened, owner, opened.put(owner, "t", 1, "tool", "fuzz target").id


PRINCIPALS = st.sampled_from([Principal("fuzz-owner"), Principal("someone-else")]) | WIDE


@FUZZ
@given(data=st.data())
def test_fuzz_public_methods_raise_only_vault_errors(fuzzed, data):
    vault, owner, rid = fuzzed
    who, ident = data.draw(PRINCIPALS), data.draw(st.just(rid) | WIDE)
    args = [data.draw(WIDE) for _ in range(5)]
    calls = [
        lambda: vault.put(who, *args[:4], ttl_seconds=args[4]), lambda: vault.put(owner, "t", 2, "tool", args[0]),
        lambda: vault.put(owner, args[0], args[1], args[2], "x"), lambda: vault.get(who, ident),
        lambda: vault.read(who, ident, args[0], args[1], start=args[2], end=args[3]),
        lambda: vault.read(owner, rid, mode="range", start=args[0], end=args[1]), lambda: vault.delete(who, args[4]),
        lambda: vault.list_for_turn(who, args[0]), lambda: Principal(args[0], args[1], args[2]),
    ]
    for call in calls:
        only_vault_errors(call, vault)
    assert vault.get(owner, rid).content == "fuzz target"


@FUZZ
@given(now=WIDE)
@example(now=10**400)
def test_fuzz_gc_raises_only_vault_errors(tmp_path_factory, now):
    directory = tmp_path_factory.mktemp("gc")
    directory.chmod(0o700)
    with Vault.open(directory / "g.db", keyring_backend=MemoryKeyring(), clock=FakeClock()) as opened:
        opened.put(Principal("p"), "t", 1, "tool", "x")
        only_vault_errors(lambda: opened.gc(now), opened)


@FUZZ
@given(settings_=st.fixed_dictionaries({}, optional={k: WIDE for k in (
    "max_read", "max_ttl_seconds", "key_cache_seconds", "key_cache_size")}))
@example(settings_={"max_ttl_seconds": 10**400})
def test_fuzz_open_settings_raise_only_vault_errors(tmp_path_factory, settings_):
    directory = tmp_path_factory.mktemp("open")
    directory.chmod(0o700)
    try:
        Vault.open(directory / "o.db", keyring_backend=MemoryKeyring(), **settings_).close()
    except VaultError:
        pass
