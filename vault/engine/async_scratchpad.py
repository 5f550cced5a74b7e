"""Engine integration for asyncio engines: the Scratchpad's calls as coroutines over a bounded thread pool that the
facade owns, so no vault work (disk, keyring, encryption) ever runs on the event loop, opening and closing included.

Cancellation, defined once for every coroutine here:
- a call still waiting for a free worker when it is cancelled never runs;
- a running read (``full_value``, ``resolve``, ``tools``, ``call_tool``) is abandoned at once: CancelledError
  reaches the caller now, the worker finishes on its own, changes nothing, and its result is dropped;
- a running write (``observe``, ``resume``, and opening and closing) is finished first: when CancelledError reaches
  the caller the write is complete or was never started, and a stream it was given is no longer being read. The
  vault's put is atomic, so a cancelled observe stored a whole row or nothing; a stored one is an ordinary row of
  the turn (``resume`` lists it, ``tools`` offers the read, it expires with its lifetime);
- ``close`` waits for every call it accepted, abandoned reads included, before it closes the vault.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Generator, Mapping
from functools import partial
from pathlib import Path
from typing import Any, TypeVar, Unpack, cast

from keys import TRIAL_KEYRING, resolve_backend
from vault.engine.scratchpad import DEFAULT_THRESHOLD_BYTES, MetricsHook, PadOptions, Scratchpad
from vault.errors import InvalidArgument, StorageError
from vault.inputs import check_int, check_keywords
from vault.model import Principal
from vault.opening import OpenOptions, warns_of_a_trial_keyring
from vault.vault import Vault

# Four workers: a slow keyring call or a large put (~130 ms for 20 MB) in one leaves others free for the model's
# reads, while more would mostly wait (writes take the vault's write lock one at a time, Python code the GIL,
# PostgreSQL's pool has 8 connections by default) and each worker keeps a database connection of its own.
DEFAULT_WORKERS = 4
MAX_WORKERS = 32
_THREAD_NAME = "scratchvault-async"
T = TypeVar("T")


class AsyncPadOptions(PadOptions, total=False):
    """The keyword settings of an :class:`AsyncScratchpad`: a :class:`Scratchpad`'s, plus ``workers``."""

    workers: int


class AsyncOpenOptions(OpenOptions, total=False):
    """The keywords of :meth:`AsyncScratchpad.open`: ``Vault.open``'s (``max_read`` among them, the vault's), and
    the pad's other settings."""

    threshold_bytes: int
    allow_other_turns: bool
    ttl_seconds: float
    metrics: MetricsHook | None
    workers: int
    refresh_on_read: bool


_PAD_KEYWORDS = AsyncOpenOptions.__optional_keys__ - OpenOptions.__optional_keys__


class AsyncScratchpad:
    """:class:`Scratchpad` for asyncio: the same arguments, results and exceptions, as coroutines run by at most
    ``workers`` threads. It takes the vault over: :meth:`close` closes it once the calls in flight are done."""

    def __init__(self, vault: Vault, threshold_bytes: int = DEFAULT_THRESHOLD_BYTES,
                 **options: Unpack[AsyncPadOptions]) -> None:
        """The Scratchpad's settings (``metrics`` is called in the worker threads), plus ``workers`` (1 to 32): how
        many vault calls may run at once; 4 by default, enough to keep reads going beside a slow put (see above)."""
        check_keywords("AsyncScratchpad", options, AsyncPadOptions.__optional_keys__)
        workers = options.get("workers", DEFAULT_WORKERS)
        pad_options = cast(PadOptions, {name: value for name, value in options.items() if name != "workers"})
        self._pad = Scratchpad(vault, threshold_bytes, **pad_options)
        self._vault = vault
        self.workers = check_int(workers, "workers", 1, MAX_WORKERS)
        self._pool = concurrent.futures.ThreadPoolExecutor(self.workers, thread_name_prefix=_THREAD_NAME)
        self._lock = threading.Lock()  # orders submissions before the pool's shutdown
        self._closing: concurrent.futures.Future[None] | None = None

    @classmethod
    def open(cls, path: str | Path | None = None, **options: Unpack[AsyncOpenOptions]) -> Opening:
        """Open the vault (``Vault.open(path, **vault_options)``: keyring and disk) in a thread and make a pad of
        it: ``async with AsyncScratchpad.open(...) as pad:``, or ``pad = await AsyncScratchpad.open(...)``. The
        keywords are the pad's (``threshold_bytes`` and :class:`AsyncPadOptions`) and ``Vault.open``'s."""
        settings = {name: value for name, value in options.items() if name in _PAD_KEYWORDS}
        vault_options = {name: value for name, value in options.items() if name not in _PAD_KEYWORDS}
        if warns_of_a_trial_keyring(vault_options.get("keyring_backend"), 2):  # here, not in the opening thread,
            vault_options["keyring_backend"] = resolve_backend(TRIAL_KEYRING)  # where no frame is the caller's
        return Opening(partial(_open_pad, cls, path, settings, vault_options))

    # -- the Scratchpad's calls --------------------------------------------------------------------------
    async def observe(self, principal: Principal, turn_id: str, step_num: int, executor_name: str, observation: Any,
                      *, ttl_seconds: float | None = None) -> Any:
        """:meth:`Scratchpad.observe`. A cancelled observe stored a complete row, or nothing."""
        return await self._write(self._pad.observe, principal, turn_id, step_num, executor_name, observation,
                                 ttl_seconds=ttl_seconds)

    async def full_value(self, principal: Principal, turn_id: str, observed: Any) -> Any:
        """:meth:`Scratchpad.full_value`."""
        return await self._read(self._pad.full_value, principal, turn_id, observed)

    async def resolve(self, principal: Principal, turn_id: str, steps: Mapping[int, Any], reference: str) -> Any:
        """:meth:`Scratchpad.resolve`."""
        return await self._read(self._pad.resolve, principal, turn_id, steps, reference)

    async def tools(self, principal: Principal, turn_id: str, shape: str = "neutral", *,
                    strict: bool = False) -> list[dict[str, Any]]:
        """:meth:`Scratchpad.tools`."""
        return await self._read(self._pad.tools, principal, turn_id, shape, strict=strict)

    async def resume(self, principal: Principal, turn_id: str, *,
                     ttl_seconds: float | None = None) -> list[dict[str, Any]]:
        """:meth:`Scratchpad.resume`. A cancelled resume extended the turn's rows, or none of them."""
        return await self._write(self._pad.resume, principal, turn_id, ttl_seconds=ttl_seconds)

    async def call_tool(self, principal: Principal, turn_id: str, arguments: Any) -> dict[str, Any]:
        """:meth:`Scratchpad.call_tool`: never raises for the model's arguments or a vault fault; a closed pad,
        the runtime's own mistake, raises StorageError like every other call."""
        return await self._read(self._pad.call_tool, principal, turn_id, arguments)

    # -- no vault work: plain attributes, safe on the loop -----------------------------------------------
    @property
    def max_read(self) -> int:
        """:attr:`Scratchpad.max_read` (no vault call, so not a coroutine)."""
        return self._pad.max_read

    @property
    def threshold_bytes(self) -> int:
        """The one setting that decides what ``observe`` offloads."""
        return self._pad.threshold_bytes

    def stats(self) -> dict[str, int]:
        """:meth:`Scratchpad.stats`: in-memory counters behind a lock held only to copy them, so not a coroutine."""
        return self._pad.stats()

    # -- closing ------------------------------------------------------------------------------------------
    async def close(self) -> None:
        """Refuse new calls, wait for every accepted one, then close the vault, all in a thread of its own.
        Closing again (or from several tasks) waits for the same close; cancelling it does not stop it."""
        with self._lock:
            if self._closing is None:
                self._closing = _in_new_thread(self._shut_down)
            closing = self._closing
        await _outcome(closing, abandon=False)

    def _shut_down(self) -> None:
        self._pool.shutdown(wait=True)  # queued calls still run; then no thread uses the vault
        self._vault.close()

    async def __aenter__(self) -> AsyncScratchpad:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # -- one call in a worker -----------------------------------------------------------------------------
    async def _read(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await _outcome(self._submit(call, *args, **kwargs), abandon=True)

    async def _write(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await _outcome(self._submit(call, *args, **kwargs), abandon=False)

    def _submit(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> concurrent.futures.Future[T]:
        """Queue a call for the pool (never blocks); StorageError once closing began, like a closed vault's."""
        with self._lock:
            if self._closing is not None:
                raise StorageError("the scratchpad is closed")
            return self._pool.submit(call, *args, **kwargs)


class Opening:
    """What :meth:`AsyncScratchpad.open` returns: await it for the pad, or use it as an async context manager
    that closes the pad (and its vault) on exit."""

    def __init__(self, start: Callable[[], AsyncScratchpad]) -> None:
        self._start: Callable[[], AsyncScratchpad] | None = start
        self._pad: AsyncScratchpad | None = None

    def __await__(self) -> Generator[Any, None, AsyncScratchpad]:
        return self._open().__await__()

    async def __aenter__(self) -> AsyncScratchpad:
        self._pad = await self._open()
        return self._pad

    async def __aexit__(self, *exc_info: object) -> None:
        if self._pad is not None:
            await self._pad.close()

    async def _open(self) -> AsyncScratchpad:
        """Open in a thread; when cancelled, the opening is finished and what it opened closed before the
        CancelledError goes on, so no vault is left open behind the caller."""
        if self._start is None:
            raise InvalidArgument("this open() was already used; call AsyncScratchpad.open again for another pad")
        opening, self._start = _in_new_thread(self._start), None
        try:
            return await _outcome(opening, abandon=False)
        except asyncio.CancelledError:
            if not opening.cancelled() and opening.exception() is None:
                await opening.result().close()
            raise


def _open_pad(cls: type[AsyncScratchpad], path: str | Path | None, settings: dict[str, Any],
              vault_options: dict[str, Any]) -> AsyncScratchpad:
    """Runs in a thread: the vault, then the pad; the vault is closed again when the pad's settings are refused."""
    vault = Vault.open(path, **vault_options)
    try:
        return cls(vault, **settings)
    except BaseException:
        vault.close()
        raise


async def _outcome(future: concurrent.futures.Future[T], *, abandon: bool) -> T:
    """The worker's result or exception. Cancelled while the call waits for a worker: it never runs. Cancelled
    while it runs: with ``abandon`` CancelledError goes on at once, else only once the call has finished."""
    waiting = asyncio.wrap_future(future)
    try:
        return await asyncio.shield(waiting)  # the call is not cancelled with its caller, only as below
    except asyncio.CancelledError:
        if not future.cancel() and not abandon:
            while not waiting.done():
                try:
                    await asyncio.wait({waiting})
                except asyncio.CancelledError:  # cancelled again: the CancelledError below already says so
                    continue
        raise


def _in_new_thread(work: Callable[[], T]) -> concurrent.futures.Future[T]:
    """Run ``work`` in a thread of its own (opening before the pool exists, closing the pool itself)."""
    one_thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=_THREAD_NAME)
    future = one_thread.submit(work)
    one_thread.shutdown(wait=False)  # the thread ends when ``work`` does
    return future
