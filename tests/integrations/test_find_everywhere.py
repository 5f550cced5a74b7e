"""``scratchpad_read``'s mode find from each framework adapter and from the MCP SDK's own client, offline: the
model's call reaches ``call_tool`` as it was sent, so every declared shape finds the same matches."""

from __future__ import annotations

import asyncio
import json

import anyio
from agents import Agent as AgentsAgent
from agents import Runner
from langchain.agents import create_agent
from mcp import Client
from pydantic_ai import Agent
from pydantic_ai.models.function import FunctionModel

from tests.integrations import langgraph_script, test_openai_agents, test_pydantic_ai
from vault.engine import Scratchpad
from vault.integrations import langchain, mcp, openai_agents
from vault.integrations.langchain_agents import ScratchpadMiddleware

QUERY = {"mode": "find", "query": "F0399.CSV", "ignore_case": True}


def expected(pad: Scratchpad, principal, row: str) -> dict:
    answer = pad.call_tool(principal, "t1", {"id": row, **QUERY})
    assert [match["offset"] for match in answer["matches"]] and answer["more"] is False
    return answer


def test_from_pydantic_ai(vault, alice):
    pad = Scratchpad(vault, threshold_bytes=4096)
    script = test_pydantic_ai.Script(("list_files", {}), ("scratchpad_read", lambda s: {"id": s.stored_id(), **QUERY}))
    Agent(FunctionModel(script), deps_type=test_pydantic_ai.Deps, toolsets=test_pydantic_ai.toolsets(pad)).run_sync(
        "go", deps=test_pydantic_ai.Deps(alice, "t1"))
    assert script.seen(1) == expected(pad, alice, script.stored_id())


def test_from_langgraph(vault, alice):
    pad = Scratchpad(vault, threshold_bytes=4096)
    model = langgraph_script.run(pad, alice, langgraph_script.call("list_files"),
                                 langgraph_script.call("scratchpad_read", lambda s: {"id": s.stored_id(), **QUERY}))
    assert model.seen(1) == expected(pad, alice, model.stored_id())


def test_from_the_agents_sdk_with_a_strict_model(vault, alice):
    pad = Scratchpad(vault)
    model = test_openai_agents.ScriptedModel([("fetch_report", {}), ("scratchpad_read", lambda outputs: {
        "id": json.loads(outputs[0])["id"], "mode": "find", "query": '"n": 399,'}), "done"], strict_calls=True)
    agent = AgentsAgent(name="a", model=model, tools=[*openai_agents.offloading(pad, [test_openai_agents.fetch_report]),
                                                      openai_agents.scratchpad_read_tool(pad)])
    asyncio.run(Runner.run(agent, "go", context=openai_agents.TurnContext(alice, "t1")))
    [match] = json.loads(model.outputs[1])["matches"]
    assert test_openai_agents.TEXT[match["offset"]:].startswith('"n": 399,')


def test_from_the_mcp_sdks_client(vault, alice):
    pad = Scratchpad(vault)
    row = pad.observe(alice, "t1", 1, "ls", {"files": [f"/srv/f{i:04}.csv" for i in range(400)]})["id"]

    async def host() -> None:
        async with Client(mcp.build_server(pad, mcp.fixed_principal(alice, "t1"))) as client:
            [tool] = (await client.list_tools()).tools
            assert "find" in tool.input_schema["properties"]["mode"]["enum"]
            answer = await client.call_tool("scratchpad_read", {"id": row, **QUERY})
            assert answer.structured_content == expected(pad, alice, row) and answer.is_error is False

    anyio.run(host)


def test_from_langchains_create_agent(vault, alice):
    pad = Scratchpad(vault, threshold_bytes=4096)
    model = langgraph_script.Script(steps=[langgraph_script.call("list_files"), langgraph_script.call(
        "scratchpad_read", lambda s: {"id": s.stored_id(), **QUERY})])
    agent = create_agent(model, langchain.offloading(pad, [langgraph_script.list_files]),
                         middleware=[ScratchpadMiddleware(pad)], context_schema=langgraph_script.Turn)
    final = agent.invoke({"messages": [("user", "go")]}, context=langgraph_script.Turn(alice, "t1"))
    assert final["messages"][-1].content == "done"
    assert model.seen(1) == expected(pad, alice, model.stored_id())
