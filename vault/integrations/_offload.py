"""What every adapter shares: the pad it drives (a ``Scratchpad``, or an ``AsyncScratchpad`` whose own workers
then run every vault call, so its ``close`` waits for them), and the offloading rule: a tool result the vault
cannot keep becomes an error answer for the model (``STORE_FAILED``, no content), as ``call_tool`` and ``tools``
fail soft."""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections import OrderedDict
from typing import Any

import anyio.to_thread
import pydantic_core

from vault.engine import STORE_FAILED, AsyncScratchpad, Scratchpad
from vault.errors import InvalidArgument, VaultError
from vault.inputs import check_identifier, check_step
from vault.model import Principal, check_principal

log = logging.getLogger("scratchvault.integrations")
PASS = object()  # a result the framework shows as it is: never stored
UNSTORABLE = object()  # a result no JSON holds (circular, nested too deep): STORE_FAILED, like a vault fault
Pad = Scratchpad | AsyncScratchpad


class TurnSteps:
    """The step rule of every adapter: a tool result's ``step_num`` is its place among the results of its turn
    that went through ``observe`` (stored or shown inline): 1, 2, 3, ... in the order they arrive, so two calls
    of one model response get two numbers. Counted per user and turn in this process, for the most recent
    ``MAX_TURNS`` turns; thread-safe."""

    MAX_TURNS = 4096

    def __init__(self) -> None:
        self._counts: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._lock = threading.Lock()

    def next(self, principal: Principal, turn_id: str) -> int:
        """The step number of the turn's next result; a bad principal or turn id is the runtime's error."""
        check_principal(principal)
        key = (principal.user_id, check_identifier(turn_id, "turn_id"))
        with self._lock:
            step = self._counts.pop(key, 0) + 1
            self._counts[key] = step
            if len(self._counts) > self.MAX_TURNS:
                self._counts.popitem(last=False)
            return step


def check_pad(pad: object, name: str = "pad") -> None:
    """The caller's pad, checked when an adapter is made, not in the middle of a run."""
    if not isinstance(pad, Scratchpad | AsyncScratchpad):
        raise InvalidArgument(f"{name} must be a Scratchpad or an AsyncScratchpad")


async def pad_call(pad: Pad, method: str, *args: Any, **kwargs: Any) -> Any:
    """``pad.<method>(*args)`` off the event loop: the facade's coroutine, or the Scratchpad's call in a worker
    thread (which runs in a copy of the caller's context, so a framework's context variables still hold)."""
    if isinstance(pad, AsyncScratchpad):
        return await getattr(pad, method)(*args, **kwargs)
    return await anyio.to_thread.run_sync(functools.partial(getattr(pad, method), *args, **kwargs))


def pad_call_blocking(pad: Pad, method: str, *args: Any) -> Any:
    """``pad.<method>(*args)`` from synchronous code; an AsyncScratchpad's coroutine is run to completion on a
    loop of this thread (see :func:`check_blocking`)."""
    if isinstance(pad, Scratchpad):
        return getattr(pad, method)(*args)
    check_blocking(pad)
    return asyncio.run(getattr(pad, method)(*args))


def check_blocking(pad: Pad) -> None:
    """InvalidArgument when synchronous code on a running event loop would wait for an AsyncScratchpad: that
    would stall the very loop the application runs (a framework runs sync tools in worker threads instead)."""
    if isinstance(pad, AsyncScratchpad):
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        raise InvalidArgument("synchronous code on a running event loop cannot wait for an AsyncScratchpad; "
                              "use the framework's async entry points, or a Scratchpad")


def json_value(result: Any) -> Any:
    """``result`` as the JSON value the model would have seen; ``PASS`` for a type pydantic cannot serialise (the
    framework shows it its own way), ``UNSTORABLE`` for a value no JSON holds (pydantic raises ValueError)."""
    try:
        return pydantic_core.to_jsonable_python(result)
    except pydantic_core.PydanticSerializationError:
        return PASS
    except ValueError:  # circular, or nested deeper than pydantic serialises (the vault stores 256 levels)
        return UNSTORABLE


def observe_result(pad: Pad, principal: Principal, turn_id: str, step_num: int, tool_name: str,
                   result: Any) -> Any:
    """What the model sees of a tool's result, from synchronous code: ``pad.observe``'s answer, or
    ``STORE_FAILED`` when the vault cannot keep it (a closed vault, the keyring, the store, or a value it cannot
    store), logged by error type; never the large result inline. What the application set (principal, turn,
    step, tool name) raises when wrong."""
    arguments = _observation(principal, turn_id, step_num, tool_name, result)
    if arguments is None:
        return dict(STORE_FAILED)
    check_blocking(pad)
    try:
        return pad_call_blocking(pad, "observe", *arguments)
    except VaultError as error:
        return _store_failed(error)


async def aobserve_result(pad: Pad, principal: Principal, turn_id: str, step_num: int, tool_name: str,
                          result: Any) -> Any:
    """:func:`observe_result` for async code: the vault's work runs off the event loop."""
    arguments = _observation(principal, turn_id, step_num, tool_name, result)
    if arguments is None:
        return dict(STORE_FAILED)
    try:
        return await pad_call(pad, "observe", *arguments)
    except VaultError as error:
        return _store_failed(error)


def _observation(principal: Principal, turn_id: str, step_num: int, tool_name: str,
                 result: Any) -> tuple[Any, ...] | None:
    """``observe``'s arguments, the application's checked (raising when wrong); None for an unstorable result."""
    check_principal(principal)
    check_identifier(turn_id, "turn_id")
    check_step(step_num)
    check_identifier(tool_name, "executor_name")
    if result is UNSTORABLE:
        log.warning("a tool result was not offloaded: not JSON (circular or nested too deep)")
        return None
    return principal, turn_id, step_num, tool_name, result


def _store_failed(error: VaultError) -> dict[str, str]:
    log.warning("a tool result was not offloaded: %s", type(error).__name__)
    return dict(STORE_FAILED)
