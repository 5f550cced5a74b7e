"""OpenAI Agents SDK adapter (``scratchvault[openai-agents]``): the ``scratchpad_read`` FunctionTool, and a
wrapper that offloads another FunctionTool's large results through ``Scratchpad.observe``.

The principal and turn come from the run context the application passes to ``Runner.run(..., context=...)``:
a :class:`TurnContext`, or any object with ``principal``, ``turn_id`` and ``next_step()`` (see
:class:`ScratchpadRunContext`). The model's arguments never choose whose data is read. Results reach the model
as JSON text, never as Python repr. Vault calls block, so they run in a worker thread, off the event loop.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from agents import FunctionTool, RunContextWrapper
from agents.tool_context import ToolContext
from pydantic import BaseModel

from vault.engine.scratchpad import STORE_FAILED
from vault.engine.tool import SCRATCHPAD_READ_TOOL, tool_declaration
from vault.errors import InvalidArgument
from vault.integrations._offload import PASS as _PASS
from vault.integrations._offload import Pad, aobserve_result, check_pad, json_value, pad_call
from vault.model import Principal, check_principal

__all__ = ["STORE_FAILED", "ScratchpadRunContext", "TurnContext", "offloading", "scratchpad_read_tool"]


@runtime_checkable
class ScratchpadRunContext(Protocol):
    """What the run context must carry: whose turn this is (set by the application, never by the model) and
    the step number of the next offloaded result."""

    principal: Principal
    turn_id: str

    def next_step(self) -> int: ...


@dataclasses.dataclass
class TurnContext:
    """A ready-made run context: ``Runner.run(agent, input, context=TurnContext(principal, "turn-1"))``."""

    principal: Principal
    turn_id: str
    steps: int = 0
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock, repr=False, compare=False)

    def next_step(self) -> int:
        """1, 2, 3, ... for this turn's offloaded results (the N of ``${stepN}``)."""
        with self._lock:
            self.steps += 1
            return self.steps


def scratchpad_read_tool(pad: Pad, *, strict: bool = True) -> FunctionTool:
    """``scratchpad_read`` as a FunctionTool over ``pad`` (a Scratchpad or an AsyncScratchpad), offered only while
    ``pad.tools()`` offers it. ``strict`` (the SDK's default) declares OpenAI's strict schema, which the SDK keeps
    as it is; ``strict=False`` the lenient one."""
    check_pad(pad)
    if not isinstance(strict, bool):
        raise InvalidArgument("strict must be a bool")
    parameters = tool_declaration("openai-responses", strict=True)["parameters"] if strict else (
        tool_declaration("neutral")["parameters"])

    async def invoke(context: ToolContext[Any], arguments: str) -> str:
        run = _run_context(context)
        result = await pad_call(pad, "call_tool", run.principal, run.turn_id, arguments)
        return json.dumps(result, ensure_ascii=False)

    async def offered(context: RunContextWrapper[Any], agent: object) -> bool:
        run = _run_context(context)
        return bool(await pad_call(pad, "tools", run.principal, run.turn_id))

    return FunctionTool(name=SCRATCHPAD_READ_TOOL["name"], description=SCRATCHPAD_READ_TOOL["description"],
                        params_json_schema=parameters, on_invoke_tool=invoke, strict_json_schema=strict,
                        is_enabled=offered)


def offloading(pad: Pad, tools: Sequence[FunctionTool]) -> list[FunctionTool]:
    """Copies of ``tools`` whose results go through ``pad.observe`` before the model sees them: small ones as
    they are, large ones stored and replaced by their representation. A dict or list result is stored as JSON
    and shown as JSON text; a string as text; one the vault cannot keep (a fault) is ``STORE_FAILED``, and the
    run goes on. Other outputs (the SDK's image and file outputs) pass through."""
    check_pad(pad)
    if not isinstance(tools, list | tuple) or not all(isinstance(tool, FunctionTool) for tool in tools):
        raise InvalidArgument("tools must be a list of agents FunctionTools")
    return [_offloading(pad, tool) for tool in tools]


def _offloading(pad: Pad, tool: FunctionTool) -> FunctionTool:
    inner = tool.on_invoke_tool

    async def invoke(context: ToolContext[Any], arguments: str) -> Any:
        run = _run_context(context)
        output = await inner(context, arguments)
        storable = _storable(output)
        if storable is _PASS:
            return output
        observed = await aobserve_result(pad, run.principal, run.turn_id, run.next_step(), tool.name,
                                         storable)  # STORE_FAILED when the vault cannot keep it
        return observed if isinstance(observed, str) else json.dumps(observed, ensure_ascii=False)

    # the representation replaces the result, so an output schema the tool declared no longer applies
    return dataclasses.replace(tool, on_invoke_tool=invoke, output_json_schema=None, _output_type_adapter=None)


def _storable(output: Any) -> Any:
    """What ``observe`` takes for a tool's output: text as it is, a dict, list, tuple, dataclass or pydantic model
    as its JSON value (as the pydantic-ai and LangChain wrappers take them); the SDK's own outputs (images, files:
    its models, or lists of them) and plain scalars pass (``_PASS``)."""
    if isinstance(output, str):
        return output
    items = output if isinstance(output, list | tuple) else [output]
    structured = isinstance(output, dict | list | tuple | BaseModel) or (
        dataclasses.is_dataclass(output) and not isinstance(output, type))
    if not structured or any(_sdk_made(item) for item in items):
        return _PASS
    return json_value(output)


def _sdk_made(value: object) -> bool:
    return type(value).__module__.split(".")[0] == "agents"


def _run_context(wrapper: RunContextWrapper[Any]) -> ScratchpadRunContext:
    """The application's run context; a missing or wrong one is the application's bug, so it raises."""
    run = wrapper.context
    if not isinstance(run, ScratchpadRunContext):
        raise InvalidArgument("the run context must carry principal, turn_id and next_step() (e.g. TurnContext)")
    check_principal(run.principal)
    return run
