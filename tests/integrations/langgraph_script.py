"""The LangGraph harness of the LangChain adapter's tests: the application's tools, a chat model that scripts its
tool calls and records what each call bound and received, and the ReAct graph around them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from vault import Principal
from vault.engine import Scratchpad
from vault.integrations.langchain import offered, offloading, repair_reads, scratchpad_read_tool

LISTING = {"results": [{"path": f"/srv/f{i:04}.csv", "size": i} for i in range(400)]}
PAGE = "<p>figures</p>\n" * 999


@dataclass
class Turn:
    principal: Principal
    turn_id: str


class Row(BaseModel):
    path: str
    size: int


@tool
def list_files() -> dict:
    """A tool with a large JSON result."""
    return LISTING


@tool
def fetch_page() -> str:
    """A tool with a large text result."""
    return PAGE


@tool
def list_rows() -> list[Row]:
    """A tool returning pydantic models: stored as their JSON."""
    return [Row(**row) for row in LISTING["results"]]


@tool
def calc() -> dict:
    """A tool with a small result, shown as is."""
    return {"sum": 42}


OWN = ["calc", "fetch_page", "list_files", "list_rows"]


class Script(BaseChatModel):
    """The model: each call answers the next scripted step (tool calls or unparsed ones, possibly a function of the
    tool results so far); records the tools bound for each call and every tool result as the model received it."""

    steps: list[Any]
    offered: list[list[str]] = Field(default_factory=list)
    results: list[ToolMessage] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools, **kwargs):
        self.offered.append(sorted(convert_to_openai_tool(t)["function"]["name"] for t in tools))
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        self.results += [m for m in messages if isinstance(m, ToolMessage) and m not in self.results]
        step = self.steps.pop(0)(self) if self.steps else AIMessage("done")
        if isinstance(step, tuple):  # (tool name, args): one well-formed call
            step = AIMessage("", tool_calls=[{"name": step[0], "args": step[1], "id": f"call{len(self.offered)}"}])
        return ChatResult(generations=[ChatGeneration(message=step)])

    def seen(self, index: int):
        """The index-th tool result, parsed from the very text the model was given."""
        return json.loads(self.results[index].content)

    def stored_id(self, index: int = 0) -> str:
        return self.seen(index)["id"]


def call(name: str, args: Any = None):
    return lambda script: (name, args(script) if callable(args) else (args or {}))


def react(agent, tools):
    """The ReAct loop: the model node, a ToolNode, and LangGraph's own routing between them."""
    builder = StateGraph(MessagesState, context_schema=Turn)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile()


def graph(pad: Scratchpad, model: Script):
    """The application's ReAct graph: its tools wrapped for offloading, the read tool offered per model call."""
    tools = [*offloading(pad, [calc, fetch_page, list_files, list_rows]), scratchpad_read_tool(pad)]

    def agent(state: MessagesState, runtime: Runtime[Turn]):
        bound = model.bind_tools(offered(pad, runtime, tools))
        return {"messages": [repair_reads(bound.invoke(state["messages"]))]}
    return react(agent, tools)


def run(pad: Scratchpad, principal: Principal, *steps, turn_id: str = "t1") -> Script:
    model = Script(steps=list(steps))
    final = graph(pad, model).invoke({"messages": [("user", "go")]}, context=Turn(principal, turn_id))
    assert final["messages"][-1].content == "done"
    return model
