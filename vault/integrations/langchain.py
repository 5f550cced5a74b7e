"""LangChain tools and LangGraph: ``scratchpad_read`` as a tool, the offer at model-call time, and offloading tools.

Needs ``scratchvault[langchain]``. The principal and turn come from LangGraph's run-scoped context (what a graph
compiled with ``context_schema=...`` is invoked with: ``graph.invoke(..., context=Turn(principal, turn_id))``),
read through ``langgraph.runtime.get_runtime()`` inside the tool, never from the model's arguments. The context
carries ``principal`` and ``turn_id`` as attributes or keys, or pass ``context=`` a getter of your own.

- :func:`scratchpad_read_tool` is a tool whose ``args_schema`` is the declaration's JSON schema: LangChain does not
  validate it, so the model's arguments, whatever they are, reach ``Scratchpad.call_tool`` and get its answers.
- :func:`offered` (:func:`aoffered` in an async node) decides at model-call time (in the model node, which
  LangGraph hands the ``Runtime``) which tools to bind: ``scratchpad_read`` only when ``Scratchpad.tools``
  offers it; a vault fault leaves it out.
- :func:`repair_reads` turns the model's ``scratchpad_read`` calls that LangChain could not parse (bad JSON, an
  array, null: its ``invalid_tool_calls``, which ``ToolNode`` never runs) into calls the tool answers.
- :func:`offloading` wraps each tool (not the ``ToolNode``: there a dict result is already JSON text) so its
  result goes through ``Scratchpad.observe`` before it becomes a ``ToolMessage``: JSON is stored as json.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.tools.base import TOOL_MESSAGE_BLOCK_TYPES
from langgraph.runtime import get_runtime
from pydantic import Field

from vault.engine import tool_declaration
from vault.errors import InvalidArgument, VaultError
from vault.integrations._offload import PASS as _PASS
from vault.integrations._offload import (
    Pad,
    TurnSteps,
    aobserve_result,
    check_pad,
    json_value,
    observe_result,
    pad_call,
    pad_call_blocking,
)
from vault.model import Principal

log = logging.getLogger("scratchvault.integrations")
TOOL_NAME = "scratchpad_read"
RAW_ARGUMENTS = "scratchvault_raw_arguments"  # the one key repair_reads puts unparsable arguments under

TurnContext = Callable[[Any], tuple[Principal, str]]
_DECLARATION = tool_declaration("neutral")


def context_turn(context: Any) -> tuple[Principal, str]:
    """The default getter: ``principal`` and ``turn_id`` of the run's context, as attributes or as keys."""
    if isinstance(context, Mapping):
        principal, turn_id = context.get("principal"), context.get("turn_id")
    else:
        principal, turn_id = getattr(context, "principal", None), getattr(context, "turn_id", None)
    if principal is None or turn_id is None:
        raise InvalidArgument("the graph's context must carry principal and turn_id (or pass context=...)")
    return principal, turn_id


def _current_turn(context: TurnContext) -> tuple[Principal, str]:
    """Whose turn this tool call is: from the running graph's context, never from the model."""
    try:
        runtime = get_runtime()
    except RuntimeError:  # no runnable config: not inside a graph
        runtime = None
    if runtime is None:
        raise InvalidArgument("scratchvault tools run inside a LangGraph graph invoked with context=...")
    return context(runtime.context)


class ScratchpadReadTool(BaseTool):
    """``scratchpad_read`` for the graph's principal and turn, declared with the neutral declaration's schema.
    Its ``_run`` takes every argument as the model sent it: LangChain fills in no config, run manager or
    callbacks where the model named them, so those too reach ``call_tool`` (and are refused as unknown)."""

    name: str = TOOL_NAME
    description: str = _DECLARATION["description"]
    args_schema: Any = Field(default_factory=lambda: tool_declaration("neutral")["parameters"])
    pad: Pad
    context: TurnContext = context_turn

    def _run(self, /, *args: Any, **arguments: Any) -> dict[str, Any]:
        principal, turn_id = _current_turn(self.context)
        return pad_call_blocking(self.pad, "call_tool", principal, turn_id, _model_arguments(arguments))

    async def _arun(self, /, *args: Any, **arguments: Any) -> dict[str, Any]:
        principal, turn_id = _current_turn(self.context)
        return await pad_call(self.pad, "call_tool", principal, turn_id, _model_arguments(arguments))


def _model_arguments(arguments: dict[str, Any]) -> Any:
    """The arguments as the model sent them: a call repair_reads made runnable carries its raw arguments."""
    return arguments[RAW_ARGUMENTS] if arguments.keys() == {RAW_ARGUMENTS} else arguments


def scratchpad_read_tool(pad: Pad, *, context: TurnContext = context_turn) -> ScratchpadReadTool:
    """The ``scratchpad_read`` tool over ``pad`` (a Scratchpad or an AsyncScratchpad); ``context`` maps the
    graph's run context to (principal, turn)."""
    _check(pad, context)
    return ScratchpadReadTool(pad=pad, context=context)


def offered(pad: Pad, runtime: Any, tools: Sequence[BaseTool], *,
            context: TurnContext = context_turn) -> list[BaseTool]:
    """The tools to bind for this model call (``runtime``: the model node's ``Runtime``): all of them, less
    ``scratchpad_read`` unless ``Scratchpad.tools`` offers it; a vault fault is logged and leaves it out."""
    return without_read(tools) if not offers(pad, runtime, context=context) else list(tools)


async def aoffered(pad: Pad, runtime: Any, tools: Sequence[BaseTool], *,
                   context: TurnContext = context_turn) -> list[BaseTool]:
    """:func:`offered` for an async model node: the vault's index lookup runs off the event loop."""
    return without_read(tools) if not await aoffers(pad, runtime, context=context) else list(tools)


def offers(pad: Pad, runtime: Any, *, context: TurnContext = context_turn) -> bool:
    """Whether this model call may be offered ``scratchpad_read``: ``Scratchpad.tools`` offers it for the run's
    principal and turn; a vault fault is logged and answered "no"."""
    principal, turn_id = _model_turn(pad, runtime, context)
    try:
        return bool(pad_call_blocking(pad, "tools", principal, turn_id))
    except InvalidArgument:
        raise  # a bad principal or turn id is the runtime's bug, not a fault to hide
    except VaultError as error:
        return _not_offered(error)


async def aoffers(pad: Pad, runtime: Any, *, context: TurnContext = context_turn) -> bool:
    """:func:`offers` off the event loop."""
    principal, turn_id = _model_turn(pad, runtime, context)
    try:
        return bool(await pad_call(pad, "tools", principal, turn_id))
    except InvalidArgument:
        raise
    except VaultError as error:
        return _not_offered(error)


def without_read(tools: Sequence[Any]) -> list[Any]:
    """``tools`` less ``scratchpad_read`` (tools as LangChain objects, or provider tools as dicts)."""
    return [tool for tool in tools if (tool.get("name") if isinstance(tool, dict) else
                                       getattr(tool, "name", None)) != TOOL_NAME]


def _model_turn(pad: object, runtime: Any, context: TurnContext) -> tuple[Principal, str]:
    _check(pad, context)
    if not hasattr(runtime, "context"):
        raise InvalidArgument("runtime must be the model node's Runtime (with the graph's context)")
    return context(runtime.context)


def _not_offered(error: VaultError) -> bool:
    log.warning("scratchpad_read not offered: %s", type(error).__name__)
    return False


def repair_reads(message: AIMessage) -> AIMessage:
    """The model's message with its unparsable ``scratchpad_read`` calls made runnable: the tool answers each
    with what ``call_tool`` says of the raw arguments, where LangGraph would otherwise drop the call unanswered."""
    if not isinstance(message, AIMessage):
        raise InvalidArgument("repair_reads takes the model's AIMessage")
    broken = [call for call in message.invalid_tool_calls if call.get("name") == TOOL_NAME and call.get("id")]
    if not broken:
        return message
    repaired = [{"name": TOOL_NAME, "args": {RAW_ARGUMENTS: call.get("args")}, "id": call["id"],
                 "type": "tool_call"} for call in broken]
    return message.model_copy(update={
        "tool_calls": [*message.tool_calls, *repaired],
        "invalid_tool_calls": [call for call in message.invalid_tool_calls if call not in broken]})


def offloading(pad: Pad, tools: Sequence[BaseTool], *, context: TurnContext = context_turn) -> list[BaseTool]:
    """Copies of ``tools`` (made with ``@tool`` or ``StructuredTool``) whose results go through
    ``Scratchpad.observe`` before LangChain turns them into text: a large one is stored (JSON as json, text as
    text) and the model gets its representation as JSON (``STORE_FAILED`` when the vault cannot keep it: the
    run goes on). Messages, commands and content blocks pass through."""
    _check(pad, context)
    if not isinstance(tools, Sequence) or isinstance(tools, str):
        raise InvalidArgument("tools must be a sequence of tools")
    steps = TurnSteps()  # the wrapped tools number their results together: step_num, see TurnSteps
    return [_offloading(pad, tool, context, steps) for tool in tools]


def _check(pad: object, context: object) -> None:
    """The caller's pad and context getter, checked when a tool is made, not in the middle of a run."""
    check_pad(pad)
    if not callable(context):
        raise InvalidArgument("context must be a callable taking the graph's run context")


def _offloading(pad: Pad, tool: BaseTool, context: TurnContext, steps: TurnSteps) -> BaseTool:
    if not isinstance(tool, StructuredTool):
        raise InvalidArgument("offloading wraps tools made with @tool or StructuredTool")
    paired = tool.response_format == "content_and_artifact"

    def observation(result: Any) -> tuple[Any, ...] | None:
        """``observe``'s arguments for this result, from the graph's context; None when it passes as it is."""
        storable = _storable(result[0] if paired else result)
        if storable is _PASS:
            return None
        principal, turn_id = _current_turn(context)
        return principal, turn_id, steps.next(principal, turn_id), tool.name, storable

    def shown(result: Any, seen: Any) -> Any:
        return (seen, result[1]) if paired else seen

    update: dict[str, Any] = {}
    if tool.func is not None:
        func = tool.func

        @functools.wraps(func)  # the same signature: LangChain and LangGraph inject into it as before
        def run(*args: Any, **kwargs: Any) -> Any:
            result = func(*args, **kwargs)
            wanted = observation(result)
            return result if wanted is None else shown(result, observe_result(pad, *wanted))
        update["func"] = run
    if tool.coroutine is not None:
        coroutine = tool.coroutine

        @functools.wraps(coroutine)
        async def arun(*args: Any, **kwargs: Any) -> Any:
            result = await coroutine(*args, **kwargs)
            wanted = observation(result)
            return result if wanted is None else shown(result, await aobserve_result(pad, *wanted))
        update["coroutine"] = arun
    return tool.model_copy(update=update)


_MESSAGE_MODULES = ("langchain_core.", "langgraph.")


def _storable(result: Any) -> Any:
    """What ``observe`` takes for a tool result: text and bytes as they are, anything else as its JSON value (a
    pydantic model too); LangChain's and LangGraph's own objects and lists of content blocks pass (``_PASS``)."""
    if isinstance(result, str | bytes | bytearray):
        return result
    if isinstance(result, list) and result and all(
            isinstance(item, dict) and item.get("type") in TOOL_MESSAGE_BLOCK_TYPES for item in result):
        return _PASS  # message content, as LangGraph's ToolNode tells it
    if type(result).__module__.startswith(_MESSAGE_MODULES):
        return _PASS
    return json_value(result)
