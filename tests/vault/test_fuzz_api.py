"""Fuzzing the public methods tests/vault/test_inputs.py does not reach: Vault.extend_turn, has_rows, the turn_id of
get and read, the key lifecycle (rotate_owner_key, rewrap, retire_old_key_versions, shred_owner), Vault.stats
and tool_declaration. Whatever the arguments (types, sizes, unicode, NUL bytes, SQL-looking strings, huge
integers), only the documented VaultError subclasses come out, nothing is stored or deleted, and no row's
lifetime is shortened or its content changed.
"""

from __future__ import annotations

import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st

from keys.testing import MemoryKeyring
from tests.support.clock import FakeClock
from tests.support.fuzzing import FUZZ, WIDE
from vault import InvalidArgument, Principal, Vault, VaultError, tool_declaration

OWNER = Principal("fuzz-owner")
LONG_NAMES = st.text(min_size=1000, max_size=1100) | st.just("é" * 513) | st.just("t" * 1025)
TURNS = st.sampled_from(["t", "u", "T", "t\x00", "'; DROP TABLE rows; --", "\ud800"]) | LONG_NAMES | WIDE
TTLS = (st.integers() | st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([1e-300, 5e-324, 2**1024 - 1])
        | WIDE)
PRINCIPALS = st.sampled_from([OWNER, Principal("someone-else"), Principal("fuzz-owner ")]) | WIDE


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory):
    directory = tmp_path_factory.mktemp("fuzz-api")
    directory.chmod(0o700)
    clock = FakeClock()
    with Vault.open(directory / "f.db", keyring_backend=MemoryKeyring(), clock=clock) as opened:
        rows = [opened.put(OWNER, turn, step, "tool", f"row {step}", ttl_seconds=600).id
                for step, turn in enumerate(("t", "t", "u"))]
        yield opened, rows


def snapshot(vault: Vault, rows: list[str]) -> dict[str, tuple]:
    return {row: (record.content, record.expires_at) for row in rows
            for record in [vault.get(OWNER, row)]}


@FUZZ
@given(principal=PRINCIPALS, turn=TURNS, ttl=TTLS)
@example(principal=OWNER, turn="t", ttl=10**400)
@example(principal=OWNER, turn="t", ttl=float("nan"))
@example(principal=OWNER, turn="t", ttl=True)
@example(principal=OWNER, turn="t", ttl=30 * 24 * 3600 + 1)
def test_fuzz_extend_turn_raises_only_vault_errors_and_never_shortens_a_life(fuzzed, principal, turn, ttl):
    vault, rows = fuzzed
    before, count = snapshot(vault, rows), vault.stats()["rows"]
    try:
        extended = vault.extend_turn(principal, turn, ttl)
    except VaultError:
        extended = None
    after = snapshot(vault, rows)
    assert vault.stats()["rows"] == count
    for row, (content, expires_at) in before.items():
        assert after[row][0] == content
        assert after[row][1] >= expires_at, "extend_turn shortened a row's life"
    if extended is not None:
        assert type(extended) is int
        changed = sum(after[row][1] != before[row][1] for row in rows)
        assert extended == changed, "extend_turn's count is not the number of rows it extended"


@FUZZ
@given(principal=PRINCIPALS, turn=TURNS, row=st.sampled_from(["first", "other"]) | WIDE)
def test_fuzz_turn_scoped_reads_and_has_rows_answer_or_raise_only_vault_errors(fuzzed, principal, turn, row):
    vault, rows = fuzzed
    row_id = {"first": rows[0], "other": rows[2]}.get(row, row) if isinstance(row, str) else row
    for call in (lambda: vault.get(principal, row_id, turn_id=turn),
                 lambda: vault.read(principal, row_id, mode="full", turn_id=turn)):
        try:
            found = call()
        except VaultError:
            continue
        assert principal.user_id == OWNER.user_id
        if turn is None:  # turn_id=None is an unscoped read: any of the owner's rows
            assert row_id in rows
        else:
            assert (row_id, turn) in {(rows[0], "t"), (rows[1], "t"), (rows[2], "u")}
        assert found.id == row_id
    try:
        answer = vault.has_rows(principal, turn)
    except VaultError:
        return
    assert answer is (principal.user_id == OWNER.user_id and turn in ("t", "u"))


@FUZZ
@given(user=WIDE | LONG_NAMES | st.sampled_from(["nobody", "fuzz-owner ", "FUZZ-OWNER", "'; DELETE FROM rows; --"]),
       batch=st.integers() | WIDE)
@example(user="nobody", batch=10**400)
def test_fuzz_key_lifecycle_raises_only_vault_errors_and_touches_no_other_owner(fuzzed, user, batch):
    assume(user != OWNER.user_id)
    vault, rows = fuzzed
    before, count = snapshot(vault, rows), vault.stats()["rows"]
    for call in (lambda: vault.rotate_owner_key(user), lambda: vault.rewrap(user, batch=batch),
                 lambda: vault.retire_old_key_versions(user), lambda: vault.shred_owner(user),
                 lambda: vault.rewrap(OWNER.user_id, batch=batch)):
        try:
            result = call()
        except VaultError:
            continue
        assert type(result) is int and result >= 0
    assert snapshot(vault, rows) == before and vault.stats()["rows"] == count


def test_extend_turn_by_another_owner_or_on_another_turn_changes_nothing(fuzzed):
    vault, rows = fuzzed
    before = snapshot(vault, rows)
    assert vault.extend_turn(Principal("someone-else"), "t", 3600 * 24) == 0
    assert vault.extend_turn(OWNER, "no such turn", 3600 * 24) == 0
    assert snapshot(vault, rows) == before


@FUZZ
@given(shape=WIDE | st.sampled_from(["neutral", "openai", "anthropic", "mcp", "NEUTRAL", " mcp", "mcp\x00"]))
def test_fuzz_tool_declaration_shape_is_a_declaration_or_invalid_argument(shape):
    try:
        declaration = tool_declaration(shape)
    except InvalidArgument:
        assert shape not in ("neutral", "openai", "anthropic", "mcp")
        return
    assert shape in ("neutral", "openai", "anthropic", "mcp")
    assert "scratchpad_read" in repr(declaration)


def test_stats_after_fuzzing_reports_exactly_the_stored_rows(fuzzed):
    vault, rows = fuzzed
    stats = vault.stats()
    assert stats["rows"] == len(rows) and stats["expired_rows"] == 0
    assert all(type(value) is int and value >= 0 for value in stats["counters"].values())
