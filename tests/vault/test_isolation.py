"""Multi-user isolation: another owner's id, turn or expired row is indistinguishable from a missing one.

Attacker model: a user of the same agent service with a valid principal of their own, who learned (or
guessed) another user's row id or turn name.
"""

from __future__ import annotations

import base64
import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule

from keys.testing import MemoryKeyring
from tests.support.clock import FakeClock
from vault import InvalidArgument, NotFound, Principal, Vault

ACCESSES = {
    "get": lambda v, p, i: v.get(p, i),
    "read_head": lambda v, p, i: v.read(p, i, mode="head", n=10),
    "read_tail": lambda v, p, i: v.read(p, i, mode="tail", n=10),
    "read_full": lambda v, p, i: v.read(p, i, mode="full"),
    "read_range": lambda v, p, i: v.read(p, i, mode="range", start=2, end=8),
    "read_range_open_end": lambda v, p, i: v.read(p, i, mode="range", start=0),
    "delete": lambda v, p, i: v.delete(p, i),
}


def signature(error: BaseException) -> tuple:
    """Everything a caller could inspect on the exception object."""
    return (type(error), str(error), repr(error), error.args, error.__cause__, error.__context__,
            error.__suppress_context__)


def denial(call) -> tuple:
    with pytest.raises(NotFound) as caught:
        call()
    return signature(caught.value)


@pytest.fixture
def alice_row(vault, alice):
    return vault.put(alice, "t", 1, "web.fetch", "alice's secret page " * 50)


@pytest.mark.parametrize("access", sorted(ACCESSES))
def test_other_owner_id_is_not_found_and_leaves_row_intact(vault, alice, bob, alice_row, access):
    before = vault.get(alice, alice_row.id)
    with pytest.raises(NotFound):
        ACCESSES[access](vault, bob, alice_row.id)
    assert vault.get(alice, alice_row.id) == before
    assert [r.id for r in vault.list_for_turn(alice, "t")] == [alice_row.id]
    assert vault.stats()["rows"] == 1


@pytest.mark.parametrize("access", sorted(ACCESSES))
def test_not_found_is_identical_for_foreign_random_expired_deleted_and_malformed_ids(
        vault, alice, bob, alice_row, clock, access):
    call = ACCESSES[access]
    deleted = vault.put(bob, "t", 2, "x", "to be deleted")
    vault.delete(bob, deleted.id)
    expiring = vault.put(bob, "t", 3, "x", "short lived", ttl_seconds=10)
    signatures = {
        "foreign": denial(lambda: call(vault, bob, alice_row.id)),
        "random": denial(lambda: call(vault, bob, "0123456789abcdef" * 2)),
        "deleted": denial(lambda: call(vault, bob, deleted.id)),
    }
    for malformed in ("", "x", alice_row.id.upper(), alice_row.id[:-1], alice_row.id + "0", alice_row.id + "\n",
                      " " + alice_row.id, "../" + alice_row.id, "\u0661" * 32):
        signatures[f"malformed {malformed!r}"] = denial(lambda m=malformed: call(vault, bob, m))
    clock.advance(10)
    signatures["expired own"] = denial(lambda: call(vault, bob, expiring.id))
    signatures["expired foreign"] = denial(lambda: call(vault, alice, expiring.id))
    assert len(set(signatures.values())) == 1, signatures
    assert next(iter(signatures.values()))[1] == "no such observation"


def test_non_str_id_is_invalid_argument_not_a_lookup(vault, alice, bob, alice_row):
    for wrong in (bytes.fromhex(alice_row.id), None, 7, [alice_row.id]):
        with pytest.raises(InvalidArgument):
            vault.get(bob, wrong)
    assert vault.stats()["counters"]["denied"] == 0


def test_list_for_turn_with_same_turn_name_only_returns_own_rows(vault, alice, bob, alice_row):
    assert vault.list_for_turn(bob, "t") == []
    bob_row = vault.put(bob, "t", 1, "web.fetch", "bob's page")
    assert [r.id for r in vault.list_for_turn(alice, "t")] == [alice_row.id]
    assert [r.id for r in vault.list_for_turn(bob, "t")] == [bob_row.id]


def test_rows_of_two_owners_in_one_turn_never_mix(vault, alice, bob):
    mine = {vault.put(alice, "t", step, "tool", f"alice {step}").id: f"alice {step}" for step in (5, 1, 3)}
    theirs = {vault.put(bob, "t", step, "tool", f"bob {step}").id: f"bob {step}" for step in (2, 4, 0)}
    for principal, own, other in ((alice, mine, theirs), (bob, theirs, mine)):
        listed = vault.list_for_turn(principal, "t")
        assert {r.id for r in listed} == set(own)
        assert [r.step_num for r in listed] == sorted(r.step_num for r in listed)
        for row_id, content in own.items():
            assert vault.get(principal, row_id).content == content
        for row_id in other:
            with pytest.raises(NotFound):
                vault.read(principal, row_id)


def test_actor_and_channel_do_not_change_ownership(vault):
    writer = Principal("alice", actor="x", channel="web")
    reader = Principal("alice", actor="y", channel="cli")
    rep = vault.put(writer, "t", 1, "tool", "shared by every actor of alice")
    assert vault.get(reader, rep.id).content == "shared by every actor of alice"
    assert vault.get(Principal("alice"), rep.id).owner == writer
    assert vault.read(reader, rep.id, mode="full").content == "shared by every actor of alice"
    assert [r.id for r in vault.list_for_turn(reader, "t")] == [rep.id]
    vault.delete(reader, rep.id)
    assert vault.list_for_turn(writer, "t") == []


@pytest.mark.parametrize("other_user", ["Alice", "ALICE", "alice ", " alice", "alice\t", "alice\u200b", "alic",
                                        "alicea", "a\u0301lice"])
def test_user_id_is_compared_exactly(vault, alice_row, other_user):
    other = Principal(other_user, actor="planner", channel="web")
    for access in ACCESSES.values():
        with pytest.raises(NotFound):
            access(vault, other, alice_row.id)
    assert vault.list_for_turn(other, "t") == []
    own = vault.put(other, "t", 1, "tool", "look-alike's row")
    with pytest.raises(NotFound):
        vault.get(Principal("alice"), own.id)
    assert [r.id for r in vault.list_for_turn(Principal("alice"), "t")] == [alice_row.id]


def test_unicode_normalisation_forms_are_different_owners(vault):
    composed, decomposed = Principal("jos\u00e9"), Principal("jose\u0301")
    rep = vault.put(composed, "t\u00e9", 1, "tool", "nfc")
    with pytest.raises(NotFound):
        vault.get(decomposed, rep.id)
    assert vault.list_for_turn(decomposed, "t\u00e9") == []
    assert vault.list_for_turn(composed, "te\u0301") == []


def test_expired_foreign_row_stays_hidden_and_gc_removes_it(vault, alice, bob, alice_row, clock):
    clock.advance(3600)
    for principal in (alice, bob):
        with pytest.raises(NotFound):
            vault.get(principal, alice_row.id)
        assert vault.list_for_turn(principal, "t") == []
    assert vault.gc() == 1
    assert vault.stats()["rows"] == 0


def test_denied_counter_counts_every_denial(vault, alice, bob, alice_row):
    counters = vault.stats()["counters"]
    assert counters["denied"] == 0
    for count, access in enumerate(ACCESSES.values(), start=1):
        with pytest.raises(NotFound):
            access(vault, bob, alice_row.id)
        assert vault.stats()["counters"]["denied"] == count
    with pytest.raises(NotFound):
        vault.get(bob, "not an id")
    assert vault.stats()["counters"]["denied"] == len(ACCESSES) + 1
    vault.get(alice, alice_row.id)
    vault.list_for_turn(bob, "t")
    assert vault.stats()["counters"]["denied"] == len(ACCESSES) + 1


# -- stateful model -----------------------------------------------------------------------------------
PRINCIPALS = [Principal("alice", actor="planner"), Principal("alice", actor="critic", channel="cli"),
              Principal("bob"), Principal("Alice"), Principal("alice ")]
TURNS = ["t", "u", "T"]
SAFE_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
CONTENT = st.one_of(SAFE_TEXT, st.binary(max_size=20),
                    st.dictionaries(SAFE_TEXT, st.one_of(st.integers(), SAFE_TEXT), max_size=3))


def expected_full(content) -> str:
    if isinstance(content, bytes):
        return base64.b64encode(content).decode()
    if isinstance(content, dict):
        return json.dumps(content, ensure_ascii=False, allow_nan=False)
    return content


class EachPrincipalSeesExactlyItsOwnLiveRows(RuleBasedStateMachine):
    """Model: id -> (owner user_id, turn, step, content, expires_at); rows leave it on delete and gc."""

    row_ids = Bundle("row_ids")

    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.mkdtemp()
        self.clock = FakeClock()
        self.vault = Vault.open(Path(self.directory) / "v.db", keyring_backend=MemoryKeyring(), clock=self.clock)
        self.rows: dict[str, tuple] = {}
        self.ever: list[str] = []
        self.denied = 0

    def teardown(self) -> None:
        self.vault.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def readable(self, principal: Principal, row_id: str) -> bool:
        row = self.rows.get(row_id)
        return row is not None and row[0] == principal.user_id and row[4] > self.clock.now

    def expect_denied(self, call) -> None:
        self.denied += 1
        with pytest.raises(NotFound):
            call()

    @rule(target=row_ids, principal=st.sampled_from(PRINCIPALS), turn=st.sampled_from(TURNS),
          step=st.integers(0, 4), ttl=st.sampled_from([50, 100, 1000]), content=CONTENT)
    def put(self, principal, turn, step, ttl, content):
        rep = self.vault.put(principal, turn, step, "tool", content, ttl_seconds=ttl)
        self.rows[rep.id] = (principal.user_id, turn, step, content, self.clock.now + ttl)
        self.ever.append(rep.id)
        return rep.id

    @rule(principal=st.sampled_from(PRINCIPALS),
          row_id=row_ids | st.sampled_from(["", "0" * 32, "zz", "f" * 31]))
    def get(self, principal, row_id):
        if self.readable(principal, row_id):
            record = self.vault.get(principal, row_id)
            user_id, turn, step, content, expires_at = self.rows[row_id]
            assert (record.owner.user_id, record.turn_id, record.step_num, record.content, record.expires_at) == (
                user_id, turn, step, content, expires_at)
        else:
            self.expect_denied(lambda: self.vault.get(principal, row_id))

    @rule(principal=st.sampled_from(PRINCIPALS), row_id=row_ids, mode=st.sampled_from(["full", "head", "tail"]))
    def read(self, principal, row_id, mode):
        if self.readable(principal, row_id):
            result = self.vault.read(principal, row_id, mode=mode, n=10_000)
            assert result.content == expected_full(self.rows[row_id][3])
        else:
            self.expect_denied(lambda: self.vault.read(principal, row_id, mode=mode))

    @rule(principal=st.sampled_from(PRINCIPALS), row_id=row_ids)
    def delete(self, principal, row_id):
        if self.readable(principal, row_id):
            self.vault.delete(principal, row_id)
            del self.rows[row_id]
        else:
            self.expect_denied(lambda: self.vault.delete(principal, row_id))

    @rule(principal=st.sampled_from(PRINCIPALS), turn=st.sampled_from(TURNS))
    def list_for_turn(self, principal, turn):
        self.check_listing(principal, turn)

    def check_listing(self, principal, turn):
        listed = self.vault.list_for_turn(principal, turn)
        expected = {i for i, row in self.rows.items()
                    if row[0] == principal.user_id and row[1] == turn and self.readable(principal, i)}
        assert {rep.id for rep in listed} == expected and len(listed) == len(expected)
        assert [rep.step_num for rep in listed] == sorted(self.rows[rep.id][2] for rep in listed)

    @rule(seconds=st.sampled_from([1, 49, 50, 100, 400]))
    def advance_clock(self, seconds):
        self.clock.advance(seconds)

    @rule()
    def gc(self):
        expired = [i for i, row in self.rows.items() if row[4] <= self.clock.now]
        assert self.vault.gc() == len(expired)
        for row_id in expired:
            del self.rows[row_id]

    @invariant()
    def every_principal_reads_exactly_its_own_live_rows(self):
        for row_id in self.ever:
            for principal in PRINCIPALS:
                if self.readable(principal, row_id):
                    assert self.vault.read(principal, row_id, mode="head", n=0).id == row_id
                else:
                    self.expect_denied(lambda p=principal, i=row_id: self.vault.read(p, i, mode="head", n=0))
        for principal in PRINCIPALS:
            for turn in TURNS:
                self.check_listing(principal, turn)
        stats = self.vault.stats()
        assert stats["rows"] == len(self.rows)
        assert stats["expired_rows"] == sum(row[4] <= self.clock.now for row in self.rows.values())
        assert stats["counters"]["denied"] == self.denied


TestEachPrincipalSeesExactlyItsOwnLiveRows = EachPrincipalSeesExactlyItsOwnLiveRows.TestCase
TestEachPrincipalSeesExactlyItsOwnLiveRows.settings = settings(
    max_examples=30, stateful_step_count=30, deadline=None, database=None)
