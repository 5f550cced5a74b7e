"""The asyncio facade under load and cancellation (semantics in vault/engine/async_scratchpad.py's docstring): the
loop keeps running during a 20 MB observe, at most ``workers`` vault calls run at once, a call cancelled before it
runs never does, a cancelled write is finished before its caller hears of the cancellation, and close waits for
every call in flight; after each, the vault reopens whole."""

from __future__ import annotations

import asyncio
import hashlib
import time

import pytest

from tests.support.async_gates import HeldReads, HeldStream
from vault import Vault, storage
from vault.engine import NOT_FOUND, AsyncScratchpad, Scratchpad

T = 4096
BIG = "a line of a fetched page\n" * (20_000_000 // 25)  # 20 MB of text: a put of ~0.1 s
UNKNOWN = {"id": "0" * 32}


async def longest_stall(work) -> tuple[float, float]:
    """Await ``work`` while a ticker sleeps 1 ms at a time: (how long the work took, the longest gap between
    ticks), the gap being how long the loop could not run anything else."""
    stop, gaps = asyncio.Event(), [0.0]

    async def tick():
        last = time.perf_counter()
        while not stop.is_set():
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0.01)
    started = time.perf_counter()
    await work
    took = time.perf_counter() - started
    stop.set()
    await ticker
    return took, max(gaps)


def test_the_loop_keeps_running_during_a_20_mb_observe(vault, alice):
    async def scenario():
        async with AsyncScratchpad(vault, threshold_bytes=T) as pad:
            return await longest_stall(pad.observe(alice, "t1", 1, "fetch", BIG))

    took, stall = asyncio.run(scenario())
    # run on the loop, the observe would stall it for all of its duration; in a worker, for a GIL switch or two
    assert stall < took / 2, f"the loop stalled {stall * 1000:.0f} ms of a {took * 1000:.0f} ms observe"


def test_at_most_workers_vault_calls_run_at_once_outside_the_loop(vault, bob):
    held = HeldReads()

    async def scenario():
        async with AsyncScratchpad(vault, metrics=held, workers=2) as pad:
            calls = [asyncio.create_task(pad.call_tool(bob, "t1", UNKNOWN)) for _ in range(6)]
            assert await asyncio.to_thread(held.arrived, 2)
            await asyncio.sleep(0.2)  # time for any call beyond the bound to reach the gate too
            assert held.inside == 2
            held.opened.set()
            assert await asyncio.gather(*calls) == [NOT_FOUND] * 6
            return pad.stats()["denied_reads"]

    assert asyncio.run(scenario()) == 6 and held.peak == 2 and not held.timed_out
    assert all(thread.name.startswith("scratchvault-async") for thread in held.threads)


def test_a_call_cancelled_while_waiting_for_a_worker_never_runs(vault, alice, bob):
    held = HeldReads()

    async def scenario():
        async with AsyncScratchpad(vault, threshold_bytes=T, metrics=held, workers=1) as pad:
            holding = asyncio.create_task(pad.call_tool(bob, "t1", UNKNOWN))
            assert await asyncio.to_thread(held.arrived, 1)  # the one worker is busy
            queued = asyncio.create_task(pad.observe(alice, "t1", 1, "fetch", "x" * T))
            await asyncio.sleep(0.05)
            queued.cancel()
            with pytest.raises(asyncio.CancelledError):
                await queued
            held.opened.set()
            assert await holding == NOT_FOUND
            assert await pad.resume(alice, "t1") == [] and pad.stats()["offloaded_observations"] == 0

    asyncio.run(scenario())
    assert not held.timed_out


def check_reopened(db_path, keyring_backend, principal) -> list[dict]:
    """Reopen the vault: every row the turn lists reads back whole (no IntegrityError), and the store finds
    nothing wrong with itself (SQLite's quick_check); the rows' contexts, as resume gives them."""
    assert not [finding for finding in storage.describe(db_path) if finding.status == "FAIL"]
    with Vault.open(db_path, keyring_backend=keyring_backend) as vault:
        rows = Scratchpad(vault).resume(principal, "t1")
        for row in rows:
            assert len(vault.get(principal, row["id"]).content) == row["size_bytes"]
    return rows


def test_a_cancelled_observe_is_finished_before_the_cancellation_reaches_its_caller(db_path, keyring_backend,
                                                                                   alice):
    stream = HeldStream()  # 20 MB, held at its first read until the test lets it go

    async def scenario():
        async with AsyncScratchpad.open(db_path, keyring_backend=keyring_backend, threshold_bytes=T) as pad:
            storing = asyncio.create_task(pad.observe(alice, "t1", 1, "upload", stream))
            assert await asyncio.to_thread(stream.started.wait, 5)
            storing.cancel()
            await asyncio.sleep(0.05)
            assert not storing.done()  # still storing: the caller hears of its cancellation only after
            stream.opened.set()
            with pytest.raises(asyncio.CancelledError):
                await storing
            stream.caller_gone = True  # the caller may close its stream now: nothing reads it any more

    asyncio.run(scenario())
    assert stream.late_reads == 0 and stream.sent == stream.SIZE and not stream.timed_out
    [row] = check_reopened(db_path, keyring_backend, alice)  # an ordinary row of the turn, listed by resume
    with Vault.open(db_path, keyring_backend=keyring_backend) as vault:
        content = vault.get(alice, row["id"]).content
    assert hashlib.sha256(content).digest() == hashlib.sha256(stream.BYTE * stream.SIZE).digest()


@pytest.mark.parametrize("delay", [0.0, 0.02, 0.06])
def test_an_observe_of_20_mb_cancelled_at_any_moment_leaves_a_whole_row_or_none(db_path, keyring_backend, alice,
                                                                                delay):
    async def scenario():
        async with AsyncScratchpad.open(db_path, keyring_backend=keyring_backend, threshold_bytes=T) as pad:
            storing = asyncio.create_task(pad.observe(alice, "t1", 1, "fetch", BIG))
            await asyncio.sleep(delay)
            storing.cancel()
            with pytest.raises(asyncio.CancelledError):
                await storing

    asyncio.run(scenario())  # the pad is closed right after the cancellation
    rows = check_reopened(db_path, keyring_backend, alice)
    assert [row["size_bytes"] for row in rows] in ([], [len(BIG)])


def test_close_waits_for_a_write_in_flight_and_keeps_the_loop_running(db_path, keyring_backend, alice):
    stream = HeldStream()

    async def scenario():
        pad = await AsyncScratchpad.open(db_path, keyring_backend=keyring_backend)
        storing = asyncio.create_task(pad.observe(alice, "t1", 1, "upload", stream))
        assert await asyncio.to_thread(stream.started.wait, 5)
        closing = asyncio.create_task(pad.close())
        await asyncio.sleep(0.1)  # the loop runs on while close waits (a close on the loop would hold it here)
        assert not closing.done()
        stream.opened.set()
        seen = await storing  # the put finished under an open vault
        await closing
        return seen

    seen = asyncio.run(scenario())
    assert not stream.timed_out
    assert [row["id"] for row in check_reopened(db_path, keyring_backend, alice)] == [seen["id"]]


def test_a_cancelled_read_is_abandoned_at_once_but_close_still_waits_for_it(vault, bob):
    held = HeldReads()

    async def scenario():
        async with AsyncScratchpad(vault, metrics=held) as pad:
            reading = asyncio.create_task(pad.call_tool(bob, "t1", UNKNOWN))
            assert await asyncio.to_thread(held.arrived, 1)
            reading.cancel()
            with pytest.raises(asyncio.CancelledError):
                await reading  # at once: a read changes nothing, its worker finishes on its own
            closing = asyncio.create_task(pad.close())
            await asyncio.sleep(0.1)
            assert not closing.done() and held.inside == 1  # the vault is not closed under the running read
            held.opened.set()
            await closing

    asyncio.run(scenario())
    assert held.inside == 0 and not held.timed_out
