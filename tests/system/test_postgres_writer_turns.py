"""On PostgreSQL one owner's writers take turns in the order they came, and another owner's never wait for them.

What tests/system/test_writer_turns.py shows of the SQLite store's one write lock, shown here of the per-owner
advisory lock that replaces it: a put of a stream that blocks holds its owner's lock for as long as the test
wants; the writers queued behind it (each one seen waiting in ``pg_locks`` before the next starts) must commit
in that order, which their seqs (taken under the lock) record. Nothing is timed: each step waits for a state.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from keys.testing import MemoryKeyring
from tests.system.test_writer_turns import BlockingStream
from vault import Principal, Vault

pytestmark = pytest.mark.postgres
ALICE, BOB = Principal("alice"), Principal("bob")
WRITERS = 6
WAITING = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND database = " \
          "(SELECT oid FROM pg_database WHERE datname = current_database())"


def eventually(condition: Callable[[], bool], what: str) -> None:
    """Wait for a state (not a time): fail only if it never comes."""
    deadline = time.monotonic() + 120
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.005)


def in_thread(call: Callable[[], object], outcome: list) -> threading.Thread:
    thread = threading.Thread(target=lambda: outcome.append(call()))
    thread.start()
    return thread


def test_one_owners_writers_commit_in_the_order_they_came_and_another_owner_never_waits(pg_location, pg_admin):
    waiting = lambda: pg_admin.execute(WAITING).fetchone()[0]  # noqa: E731
    with Vault.open(pg_location, keyring_backend=MemoryKeyring(), pool_size=WRITERS + 3) as vault:
        vault.put(ALICE, "t", 0, "tool", "the owner's keys exist")
        vault.put(BOB, "t", 0, "tool", "and the other owner's")
        stream, outcomes = BlockingStream(), {step: [] for step in range(1, WRITERS + 2)}
        threads = [in_thread(lambda: vault.put(ALICE, "t", 1, "holder", stream), outcomes[1])]
        assert stream.inside.wait(60)  # alice's lock held by an open put
        for step in range(2, WRITERS + 2):
            threads.append(in_thread(lambda s=step: vault.put(ALICE, "t", s, "tool", f"queued {s}"), outcomes[step]))
            eventually(lambda s=step: waiting() == s - 1, f"writer {step} queued on alice's lock")
        bobs = vault.put(BOB, "t", 1, "tool", "never waits for alice's writers")  # returns while they all wait
        assert waiting() == WRITERS and vault.get(BOB, bobs.id).content == "never waits for alice's writers"
        stream.release.set()
        for thread in threads:
            thread.join(120)
        ids = [outcomes[step][0].id for step in range(1, WRITERS + 2)]
    seq_of = {bytes(row_id).hex(): seq for row_id, seq in pg_admin.execute("SELECT id, seq FROM rows").fetchall()}
    assert sorted(ids, key=seq_of.__getitem__) == ids  # the holder first, then each in the order it queued
