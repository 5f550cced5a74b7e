"""The adapters' public functions answer a caller's wrong arguments with InvalidArgument, as the whole
public API does, never with an AttributeError, TypeError or pydantic ValidationError from deeper down (or, worse,
by accepting them and failing later, inside a run)."""

from __future__ import annotations

import pytest
from langchain_core.tools import tool
from pydantic_ai.toolsets import FunctionToolset

from vault import InvalidArgument
from vault.engine import Scratchpad
from vault.integrations import langchain, mcp, openai_agents, pydantic_ai


@tool
def fetch() -> str:
    """A LangChain tool."""
    return "page"




CALLS = {
    "langchain.scratchpad_read_tool: context not callable": lambda pad: langchain.scratchpad_read_tool(pad, context=1),
    "langchain.offered: a runtime without context": lambda pad: langchain.offered(pad, None, [fetch]),
    "langchain.offered: not a Scratchpad": lambda pad: langchain.offered("pad", None, [fetch]),
    "langchain.offloading: not a Scratchpad": lambda pad: langchain.offloading("pad", [fetch]),
    "langchain.offloading: tools not a sequence": lambda pad: langchain.offloading(pad, None),
    "langchain.offloading: context not callable": lambda pad: langchain.offloading(pad, [fetch], context=1),
    "langchain.repair_reads: not an AIMessage": lambda pad: langchain.repair_reads("message"),
    "pydantic_ai.ScratchpadToolset: context not callable": lambda pad: pydantic_ai.ScratchpadToolset(pad, context=1),
    "pydantic_ai.OffloadingToolset: not a Scratchpad": lambda pad: pydantic_ai.OffloadingToolset(
        FunctionToolset([]), pad="pad"),
    "pydantic_ai.OffloadingToolset: context not callable": lambda pad: pydantic_ai.OffloadingToolset(
        FunctionToolset([]), pad=pad, context=1),
    "pydantic_ai.deps_turn: not a run context": lambda pad: pydantic_ai.deps_turn(None),
    "openai_agents.scratchpad_read_tool: strict not a bool": lambda pad: openai_agents.scratchpad_read_tool(
        pad, strict="no"),
    "mcp.build_server: name not a str": lambda pad: mcp.build_server(pad, lambda _context: None, name=1),
    "mcp.result: not an answer": lambda pad: mcp.result("answer"),
}


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
def test_a_callers_wrong_argument_is_invalid_argument(vault, call):
    with pytest.raises(InvalidArgument):
        call(Scratchpad(vault))


def test_access_token_of_a_context_without_a_request_is_none():
    """No HTTP request (stdio, or anything else a hook is handed): no verified token, so the hook refuses."""
    assert mcp.access_token(None) is None
