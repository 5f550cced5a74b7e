"""The asyncio facade (vault/engine/async_scratchpad.py): the sync Scratchpad's results and exceptions from its
coroutines, users kept apart, opening and closing off the event loop, a closed pad refusing calls, and the README
example. Cancellation, the pool's bound and the loop's responsiveness are in test_async_cancellation.py."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from keys.testing import MemoryKeyring
from tests.support.async_gates import HeldKeyring, HeldReads
from tests.support.readme import readme_block
from vault import InvalidArgument, NotFound, Principal, StorageError, Vault, VaultError
from vault.engine import NOT_FOUND, OFFLOADED_KEYS, AsyncScratchpad, Scratchpad

T = 4096
ALICE = Principal("alice", actor="planner", channel="web")
UNKNOWN = {**dict.fromkeys(OFFLOADED_KEYS, 0), "id": "0" * 32}  # shaped like an offloaded observation's context


def test_results_equal_the_sync_scratchpads(vault, alice, bob):
    sync = Scratchpad(vault, threshold_bytes=T)

    async def scenario():
        async with AsyncScratchpad(vault, threshold_bytes=T) as pad:
            small = {"sum": 42}
            assert await pad.observe(alice, "t1", 1, "calc", small) is small
            page = await pad.observe(alice, "t1", 2, "fetch", "<p>figures</p>\n" * 999)
            assert [rep.to_dict() for rep in vault.list_for_turn(alice, "t1")] == [page]
            for principal in (alice, bob):
                assert await pad.tools(principal, "t1", "openai") == sync.tools(principal, "t1", "openai")
                for arguments in ({"id": page["id"], "n": 14}, {"id": page["id"], "mode": "tail", "n": 5},
                                  {"id": page["id"], "mode": "range", "start": 3, "end": 40}, {"id": "0" * 32},
                                  "not an object", {"id": page["id"], "mode": "sideways"}):
                    assert await pad.call_tool(principal, "t1", arguments) == sync.call_tool(principal, "t1",
                                                                                             arguments)
            steps = {1: small, 2: page}
            assert await pad.full_value(alice, "t1", page) == sync.full_value(alice, "t1", page)
            assert await pad.resolve(alice, "t1", steps, "${step1.sum}") == sync.resolve(alice, "t1", steps,
                                                                                        "${step1.sum}") == 42
            assert await pad.resume(alice, "t1", ttl_seconds=60) == sync.resume(alice, "t1", ttl_seconds=60)
            assert (pad.max_read, pad.threshold_bytes) == (sync.max_read, sync.threshold_bytes)
            reads = ("tool_reads", "denied_reads", "tool_errors")
            assert [pad.stats()[name] for name in reads] == [sync.stats()[name] for name in reads] == [3, 5, 4]
            assert (pad.stats()["offloaded_observations"], pad.stats()["inline_observations"]) == (1, 1)

    asyncio.run(scenario())


def test_another_user_of_the_same_turn_finds_nothing(vault, alice, bob):
    async def scenario():
        async with AsyncScratchpad(vault, threshold_bytes=T) as pad:
            page = await pad.observe(alice, "t1", 1, "fetch", "x" * T)
            assert await pad.call_tool(bob, "t1", {"id": page["id"]}) == NOT_FOUND
            assert await pad.call_tool(alice, "t2", {"id": page["id"]}) == NOT_FOUND  # another turn of hers
            assert await pad.tools(bob, "t1") == [] and await pad.resume(bob, "t1") == []
            with pytest.raises(NotFound):
                await pad.full_value(bob, "t1", page)
            assert (await pad.call_tool(alice, "t1", {"id": page["id"], "n": 3}))["content"] == "xxx"

    asyncio.run(scenario())


BAD_CALLS = {  # a wrong call of each coroutine, and the one the vault refuses at its end
    "principal": ("observe", ("alice", "t1", 1, "x", "v"), {}),
    "turn": ("tools", (ALICE, ""), {}),
    "step": ("observe", (ALICE, "t1", -1, "x", "v"), {}),
    "not json": ("observe", (ALICE, "t1", 1, "x", {"k": float("nan")}), {}),
    "lifetime": ("observe", (ALICE, "t1", 1, "x", "v" * T), {"ttl_seconds": 1e12}),
    "reference": ("resolve", (ALICE, "t1", {}, "${step9}"), {}),
    "gone": ("full_value", (ALICE, "t1", UNKNOWN), {}),
    "shape": ("tools", (ALICE, "t1", "cobol"), {}),
    "resume": ("resume", (ALICE, "t1"), {"ttl_seconds": -1}),
    "runtime": ("call_tool", (None, "t1", {}), {}),
}


@pytest.mark.parametrize("name", sorted(BAD_CALLS))
def test_the_sync_apis_exceptions_come_through_unchanged(vault, name):
    method, args, kwargs = BAD_CALLS[name]
    with pytest.raises(VaultError) as expected:
        getattr(Scratchpad(vault, threshold_bytes=T), method)(*args, **kwargs)

    async def scenario():
        async with AsyncScratchpad(vault, threshold_bytes=T) as pad:
            with pytest.raises(VaultError) as raised:
                await getattr(pad, method)(*args, **kwargs)
            assert (type(raised.value), str(raised.value)) == (type(expected.value), str(expected.value))

    asyncio.run(scenario())


@pytest.mark.parametrize("settings", [{"workers": 0}, {"workers": 33}, {"workers": True}, {"threshold_bytes": 0}])
def test_bad_settings_are_invalid_arguments(vault, settings):
    with pytest.raises(InvalidArgument):
        AsyncScratchpad(vault, **settings)
    with pytest.raises(InvalidArgument, match="must be a Vault"):
        AsyncScratchpad("scratchpad.db")


def test_closing_twice_is_harmless_and_a_closed_pad_refuses_every_call(vault, alice):
    async def scenario():
        pad = AsyncScratchpad(vault, threshold_bytes=T)
        page = await pad.observe(alice, "t1", 1, "fetch", "x" * T)
        await asyncio.gather(pad.close(), pad.close())  # from two tasks at once: both wait for the one close
        await pad.close()
        calls = [pad.observe(alice, "t1", 2, "calc", 1), pad.full_value(alice, "t1", page),
                 pad.resolve(alice, "t1", {1: page}, "${step1}"), pad.tools(alice, "t1"), pad.resume(alice, "t1"),
                 pad.call_tool(alice, "t1", {"id": page["id"]})]
        for call in calls:
            with pytest.raises(StorageError, match="closed"):
                await call
        assert pad.stats()["offloaded_observations"] == 1 and pad.max_read == 16000

    asyncio.run(scenario())
    with pytest.raises(StorageError, match="closed"):
        vault.has_rows(alice, "t1")  # the pad took its vault over and closed it


def open_files(directory: Path) -> list[str]:
    """What this process holds open in ``directory`` (database, -wal, -shm, lock files)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            found.append(os.readlink(f"/proc/self/fd/{fd}"))
        except FileNotFoundError:  # the listing's own descriptor, closed by now
            continue
    return [target for target in found if target.startswith(str(directory))]


@pytest.mark.sqlite_only("counts the SQLite files this process holds open")
def test_open_runs_off_the_loop_and_the_context_manager_closes_pool_and_vault(vault_dir, alice):
    ring, threads = HeldKeyring(), HeldReads()  # the keyring's first answer waits until the loop itself says go

    async def say_go_when_asked():
        assert await asyncio.to_thread(ring.asked.wait, 5)
        ring.opened.set()

    async def scenario():
        go = asyncio.create_task(say_go_when_asked())
        async with AsyncScratchpad.open(vault_dir / "s.db", keyring_backend=ring, threshold_bytes=T,
                                        metrics=threads) as pad:
            await go
            page = await pad.observe(alice, "t1", 1, "fetch", "x" * T)
            assert await pad.tools(alice, "t1") and open_files(vault_dir)
        return page

    page = asyncio.run(scenario())
    assert not ring.timed_out  # an open on the loop would have held it until the keyring gave up waiting
    assert open_files(vault_dir) == [] and not any(thread.is_alive() for thread in threads.threads)
    with Vault.open(vault_dir / "s.db", keyring_backend=ring) as reopened:
        assert reopened.get(alice, page["id"]).content == "x" * T


@pytest.mark.sqlite_only("counts the SQLite files this process holds open")
def test_a_cancelled_open_finishes_and_closes_what_it_opened(vault_dir):
    ring = HeldKeyring()

    async def opened():
        return await AsyncScratchpad.open(vault_dir / "s.db", keyring_backend=ring)

    async def scenario():
        opening = asyncio.create_task(opened())
        assert await asyncio.to_thread(ring.asked.wait, 5)
        opening.cancel()
        await asyncio.sleep(0.05)
        assert not opening.done()  # the keyring is still being asked: the open finishes first
        ring.opened.set()
        with pytest.raises(asyncio.CancelledError):
            await opening

    asyncio.run(scenario())
    assert open_files(vault_dir) == []


def test_an_opening_is_used_once(db_path, keyring_backend):
    async def scenario():
        opening = AsyncScratchpad.open(db_path, keyring_backend=keyring_backend)
        async with opening as pad:
            assert await pad.tools(ALICE, "t1") == []
            with pytest.raises(InvalidArgument, match="already used"):
                await opening

    asyncio.run(scenario())


@pytest.mark.sqlite_only("counts the SQLite files this process holds open")
def test_refused_settings_close_the_vault_just_opened(vault_dir, keyring_backend):
    async def scenario():
        await AsyncScratchpad.open(vault_dir / "s.db", keyring_backend=keyring_backend, ttl_seconds=-1)

    with pytest.raises(InvalidArgument, match="ttl_seconds"):
        asyncio.run(scenario())
    assert open_files(vault_dir) == []


# -- the README example --------------------------------------------------------------------------------
SNIPPET = readme_block("### Async engines")


def test_readme_async_example_runs(db_path, capsys):
    opened = "AsyncScratchpad.open("
    assert SNIPPET.count(opened) == 1 and len(SNIPPET.strip().splitlines()) <= 30
    code = SNIPPET.replace(opened, f"{opened}{str(db_path)!r}, keyring_backend=MemoryKeyring(), ")
    exec(compile(code, "README-async", "exec"), {"__name__": "readme", "MemoryKeyring": MemoryKeyring})
    assert "<p>figures</p> 14985 False" in capsys.readouterr().out


@pytest.mark.real_keyring
def test_readme_async_example_runs_against_the_os_keyring(real_keyring, tmp_path, monkeypatch):
    data_home = tmp_path / "data"
    data_home.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_DATA_HOME", str(data_home))
    exec(compile(SNIPPET, "README-async", "exec"), {"__name__": "readme"})


def test_tools_takes_the_strict_flag_of_the_sync_scratchpad(vault, alice):
    """The facade's tools() has Scratchpad.tools' arguments, strict mode included."""
    sync = Scratchpad(vault, threshold_bytes=T)
    sync.observe(alice, "t1", 1, "fetch", "<p>figures</p>\n" * 999)

    async def scenario():
        async with AsyncScratchpad(vault, threshold_bytes=T) as pad:
            for shape in ("openai", "openai-responses"):
                assert await pad.tools(alice, "t1", shape, strict=True) == sync.tools(alice, "t1", shape, strict=True)
            with pytest.raises(InvalidArgument):
                await pad.tools(alice, "t1", "anthropic", strict=True)

    asyncio.run(scenario())
