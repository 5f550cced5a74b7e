"""pydantic-ai adapter: ``scratchpad_read`` as a toolset, and a wrapper that offloads other tools' large results.

Needs ``scratchvault[pydantic-ai]``. The principal and turn come from the run's dependencies (``ctx.deps`` with
``principal`` and ``turn_id`` attributes, see :class:`TurnDeps`, or any ``context(ctx)`` getter), never from the
model's arguments::

    agent = Agent(model, deps_type=Deps, toolsets=[ScratchpadToolset(pad), OffloadingToolset(tools, pad)])
    agent.run_sync("...", deps=Deps(principal=Principal("alice"), turn_id="turn-1"))

``scratchpad_read`` is listed at each model request only when ``Scratchpad.tools`` offers it; a vault fault there
is logged and the tool left out (the run goes on). The model's arguments reach ``Scratchpad.call_tool`` as the
model sent them (a JSON text stays text, so bad JSON, arrays and nulls get the answers ``call_tool`` gives);
pydantic-ai itself turns empty arguments (``""`` or none) into ``{}`` first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic_ai import RunContext, ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool, WrapperToolset

from vault.engine import tool_declaration
from vault.errors import InvalidArgument, VaultError
from vault.integrations._offload import PASS as _PASS
from vault.integrations._offload import Pad, TurnSteps, aobserve_result, check_pad, json_value, pad_call
from vault.model import Principal

log = logging.getLogger("scratchvault.integrations")
TOOL_NAME = "scratchpad_read"
_RAW = "arguments"  # the one key the pass-through validator puts the model's raw arguments under

TurnContext = Callable[[RunContext[Any]], tuple[Principal, str]]


@runtime_checkable
class TurnDeps(Protocol):
    """What the run's ``deps`` must carry for the default context getter: whose turn this is, from the runtime."""

    principal: Principal
    turn_id: str


def deps_turn(ctx: RunContext[Any]) -> tuple[Principal, str]:
    """The default getter: ``(ctx.deps.principal, ctx.deps.turn_id)``; a runtime without them is misconfigured."""
    deps = getattr(ctx, "deps", None)
    if not isinstance(deps, TurnDeps):
        raise InvalidArgument("the run's deps must carry .principal and .turn_id (or pass context=...)")
    return deps.principal, deps.turn_id


class _PassThrough:
    """An argument "validator" that validates nothing: the raw arguments go to ``call_tool``, which answers them."""

    def validate_json(self, input: str | bytes | bytearray, *, allow_partial: bool | Literal["off", "on",
                      "trailing-strings"] = False, **kwargs: Any) -> dict[str, Any]:
        text = input if isinstance(input, str) else bytes(input).decode("utf-8", "replace")
        return {_RAW: text}

    def validate_python(self, input: Any, *, allow_partial: bool | Literal["off", "on", "trailing-strings"] = False,
                        **kwargs: Any) -> dict[str, Any]:
        return {_RAW: input}


class ScratchpadToolset(AbstractToolset[Any]):
    """``scratchpad_read`` for the run's principal and turn, listed only when ``Scratchpad.tools`` offers it;
    ``pad`` is a Scratchpad or an AsyncScratchpad."""

    def __init__(self, pad: Pad, *, context: TurnContext = deps_turn, id: str | None = None) -> None:
        _check(pad, context)
        self._pad, self._context, self._id = pad, context, id
        declaration = tool_declaration("neutral")
        self._definition = ToolDefinition(name=TOOL_NAME, description=declaration["description"],
                                          parameters_json_schema=declaration["parameters"])

    @property
    def id(self) -> str | None:
        return self._id

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        """The tool for this step, or nothing: rows of this turn decide, a vault fault leaves it out."""
        principal, turn_id = self._context(ctx)
        if not await _offered(self._pad, principal, turn_id):
            return {}
        tool = ToolsetTool(toolset=self, tool_def=self._definition, max_retries=ctx.max_retries,
                           args_validator=_PassThrough())
        return {TOOL_NAME: tool}

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any],
                        tool: ToolsetTool[Any]) -> dict[str, Any]:
        """``Scratchpad.call_tool`` for the run's principal and turn: a JSON object, the slice or an error."""
        principal, turn_id = self._context(ctx)
        return await pad_call(self._pad, "call_tool", principal, turn_id, tool_args.get(_RAW))


async def _offered(pad: Pad, principal: Principal, turn_id: str) -> bool:
    """Whether ``scratchpad_read`` is offered; a vault fault is logged and answered "no", like ``call_tool``."""
    try:
        return bool(await pad_call(pad, "tools", principal, turn_id))
    except InvalidArgument:
        raise  # a bad principal or turn id is the runtime's bug, not a fault to hide
    except VaultError as error:
        log.warning("scratchpad_read not offered: %s", type(error).__name__)
        return False


@dataclass
class OffloadingToolset(WrapperToolset[Any]):
    """Wraps a toolset so each tool's result goes through ``Scratchpad.observe`` before the model sees it: a large
    one is stored (JSON as json, text as text, bytes as binary) and the model gets its representation; one the
    vault cannot keep (a fault) gets ``STORE_FAILED`` and the run goes on. ``pad``: a Scratchpad or an
    AsyncScratchpad."""

    pad: Pad = field(kw_only=True)
    context: TurnContext = field(default=deps_turn, kw_only=True)
    steps: TurnSteps = field(default_factory=TurnSteps, init=False, repr=False)  # step_num: see TurnSteps

    def __post_init__(self) -> None:
        _check(self.pad, self.context)

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any],
                        tool: ToolsetTool[Any]) -> Any:
        result = await self.wrapped.call_tool(name, tool_args, ctx, tool)
        storable = _storable(result)
        if storable is _PASS:
            return result
        principal, turn_id = self.context(ctx)
        return await aobserve_result(self.pad, principal, turn_id, self.steps.next(principal, turn_id), name,
                                     storable)  # STORE_FAILED when the vault cannot keep it


def _check(pad: object, context: object) -> None:
    """The caller's pad and context getter, checked when the toolset is made, not in the middle of a run."""
    check_pad(pad)
    if not callable(context):
        raise InvalidArgument("context must be a callable taking the RunContext")


def _storable(result: Any) -> Any:
    """What ``observe`` takes for a tool result: text and bytes as they are, anything else as the JSON value the
    model would have seen; pydantic-ai's own message types (``ToolReturn``, files) are passed through (``_PASS``)."""
    if isinstance(result, str | bytes | bytearray):
        return result
    if type(result).__module__.startswith("pydantic_ai."):
        return _PASS
    return json_value(result)
