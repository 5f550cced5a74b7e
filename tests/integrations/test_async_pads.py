"""Every framework adapter takes an ``AsyncScratchpad`` as it takes a ``Scratchpad``, offline through each real
framework: a large result is stored and read back, another user gets NOT_FOUND, and every vault call runs on the
facade's own workers (so its close waits for them), never on a thread the adapter made."""

from __future__ import annotations

import asyncio
import json
import threading

import anyio
import pytest
from agents import Agent as AgentsAgent
from agents import Runner
from mcp import Client
from pydantic_ai import Agent
from pydantic_ai.models.function import FunctionModel

from tests.integrations import langgraph_script, test_openai_agents, test_pydantic_ai
from vault import InvalidArgument
from vault.engine import NOT_FOUND, AsyncScratchpad
from vault.integrations import langchain, mcp, openai_agents, pydantic_ai


class Threads:
    """A metrics hook recording the name of the thread each vault call counted in."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, name: str, increment: int) -> None:
        with self._lock:
            self.names.add(threading.current_thread().name.split("_")[0])


@pytest.fixture
def threads():
    return Threads()


@pytest.fixture
def pad(vault, threads):
    made = AsyncScratchpad(vault, threshold_bytes=4096, metrics=threads)
    yield made
    asyncio.run(made.close())


def test_pydantic_ai_toolsets_take_an_async_pad(pad, threads, alice, bob):
    script = test_pydantic_ai.Script(("list_files", {}),
                                     ("scratchpad_read", lambda s: {"id": s.stored_id(), "mode": "head", "n": 12}))
    agent = Agent(FunctionModel(script), deps_type=test_pydantic_ai.Deps, toolsets=test_pydantic_ai.toolsets(pad))
    agent.run_sync("go", deps=test_pydantic_ai.Deps(alice, "t1"))
    assert script.seen(1)["content"] == json.dumps(test_pydantic_ai.LISTING)[:12]
    other = test_pydantic_ai.Script(("fetch_page", {}), ("scratchpad_read", {"id": script.stored_id()}))
    agent = Agent(FunctionModel(other), deps_type=test_pydantic_ai.Deps, toolsets=test_pydantic_ai.toolsets(pad))
    agent.run_sync("go", deps=test_pydantic_ai.Deps(bob, "t1"))
    assert other.seen(1) == NOT_FOUND
    assert threads.names == {"scratchvault-async"}


def test_openai_agents_tools_take_an_async_pad(pad, threads, alice):
    model = test_openai_agents.ScriptedModel([("fetch_report", {}), test_openai_agents.read("head", n=12), "done"])
    agent = AgentsAgent(name="analyst", model=model, tools=[*openai_agents.offloading(pad, [
        test_openai_agents.fetch_report]), openai_agents.scratchpad_read_tool(pad)])
    asyncio.run(Runner.run(agent, "go", context=openai_agents.TurnContext(alice, "t1")))
    assert json.loads(model.outputs[1])["content"] == test_openai_agents.TEXT[:12]
    assert threads.names == {"scratchvault-async"}


@pytest.mark.parametrize("invoke", ["sync", "async"])
def test_langgraph_tools_take_an_async_pad(pad, threads, alice, bob, invoke):
    tools = [*langchain.offloading(pad, [langgraph_script.fetch_page]), langchain.scratchpad_read_tool(pad)]

    def graph(model):
        if invoke == "sync":
            def agent(state, runtime):
                return {"messages": [model.bind_tools(langchain.offered(pad, runtime, tools)).invoke(
                    state["messages"])]}
        else:
            async def agent(state, runtime):
                bound = model.bind_tools(await langchain.aoffered(pad, runtime, tools))
                return {"messages": [await bound.ainvoke(state["messages"])]}
        return langgraph_script.react(agent, tools)

    def run(principal, *steps):
        model = langgraph_script.Script(steps=list(steps))
        compiled, start = graph(model), {"messages": [("user", "go")]}
        context = langgraph_script.Turn(principal, "t1")
        if invoke == "sync":
            compiled.invoke(start, context=context)
        else:
            asyncio.run(compiled.ainvoke(start, context=context))
        return model

    call = langgraph_script.call
    model = run(alice, call("fetch_page"), call("scratchpad_read", lambda s: {"id": s.stored_id(), "n": 9}))
    assert model.seen(1)["content"] == langgraph_script.PAGE[:9]
    assert model.offered == [["fetch_page"], ["fetch_page", "scratchpad_read"], ["fetch_page", "scratchpad_read"]]
    other = run(bob, call("fetch_page"), call("scratchpad_read", {"id": model.stored_id()}))
    assert other.seen(1) == NOT_FOUND
    assert threads.names == {"scratchvault-async"}


def test_the_mcp_server_takes_an_async_pad(pad, threads, alice):
    async def scenario() -> None:
        row = (await pad.observe(alice, "t1", 1, "tool", "page " * 2000))["id"]
        async with Client(mcp.build_server(pad, mcp.fixed_principal(alice, "t1"))) as client:
            assert [tool.name for tool in (await client.list_tools()).tools] == ["scratchpad_read"]
            answer = await client.call_tool("scratchpad_read", {"id": row, "n": 7})
            assert answer.structured_content["content"] == "page pa"

    anyio.run(scenario)
    assert threads.names == {"scratchvault-async"}


def test_anything_else_is_still_refused_with_both_names_in_the_message():
    for make in (lambda: pydantic_ai.ScratchpadToolset(object()), lambda: openai_agents.scratchpad_read_tool(1),
                 lambda: langchain.scratchpad_read_tool("pad"), lambda: mcp.build_server(None, lambda c: None)):
        with pytest.raises(InvalidArgument, match="Scratchpad or an AsyncScratchpad"):
            make()
