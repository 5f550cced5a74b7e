"""The shared offloading rule (vault/integrations/_offload.py) in the pydantic-ai, LangChain and Agents SDK
wrappers. A result that no JSON holds (a circular structure, one nested deeper than pydantic serialises), which the
vault refuses, reaches the model as STORE_FAILED, like NaN, and never ends the run. A step number the application's
run context gave (Agents SDK) that is not a step raises like a bad principal, never hidden as STORE_FAILED. A fault
on a large model result is STORE_FAILED logged by type only; a bad turn raises."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from agents import Agent as AgentsAgent
from agents import Runner, function_tool
from langchain_core.tools import tool
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from tests.integrations import langgraph_script as lc
from tests.integrations import test_pydantic_ai as pa
from tests.integrations.test_openai_agents import ScriptedModel
from tests.support.down_keyring import FAULTS, FaultyVault
from vault import InvalidArgument
from vault.engine import STORE_FAILED, Scratchpad
from vault.integrations import langchain, openai_agents
from vault.integrations.pydantic_ai import OffloadingToolset


class Row(BaseModel):
    path: str


def circular() -> dict:
    """A result holding itself."""
    result: dict = {"rows": ["CANARY"] * 2000}
    result["self"] = result
    return result


def deep() -> dict:
    """A result nested 300 levels deep (the vault stores 256; pydantic serialises fewer)."""
    result = node = {"label": "CANARY " * 2000}
    for _ in range(300):
        node["a"] = node = {}
    return result


def rows() -> list[Row]:
    """A large list of models."""
    return [Row(path=f"/CANARY/{i:05}") for i in range(800)]


def run_pydantic_ai(pad: Scratchpad, function, principal, turn_id: str = "t1"):
    script = pa.Script((function.__name__, {}), ("calc", {}))
    own = OffloadingToolset(FunctionToolset([function, pa.calc]), pad=pad)
    assert Agent(FunctionModel(script), deps_type=pa.Deps, toolsets=[own]).run_sync(
        "go", deps=pa.Deps(principal, turn_id)).output == "done"
    return [script.seen(0), script.seen(1)]


def run_langchain(pad: Scratchpad, function, principal, turn_id: str = "t1"):
    model = lc.Script(steps=[lc.call(function.__name__), lc.call("calc")])
    tools = langchain.offloading(pad, [tool(function), lc.calc])

    def agent(state, runtime):
        return {"messages": [model.bind_tools(tools).invoke(state["messages"])]}
    final = lc.react(agent, tools).invoke({"messages": [("user", "go")]}, context=lc.Turn(principal, turn_id))
    assert final["messages"][-1].content == "done"
    return [model.seen(0), model.seen(1)]


def run_agents(pad: Scratchpad, function, context):
    model = ScriptedModel([(function.__name__, {}), ("calc", {}), "done"])
    calc = function_tool(pa.calc)
    agent = AgentsAgent(name="a", model=model, tools=openai_agents.offloading(pad, [function_tool(function), calc]))
    asyncio.run(Runner.run(agent, "go", context=context))
    return [json.loads(output) for output in model.outputs]


RUNS = {"pydantic-ai": run_pydantic_ai, "langchain": run_langchain,
        "agents": lambda pad, function, principal, turn_id="t1": run_agents(
            pad, function, openai_agents.TurnContext(principal, turn_id))}


@pytest.mark.parametrize("framework", RUNS)
@pytest.mark.parametrize("function", [circular, deep])
def test_a_result_no_json_holds_is_store_failed_and_the_run_goes_on(vault, alice, caplog, framework, function):
    with caplog.at_level(logging.DEBUG):
        seen = RUNS[framework](Scratchpad(vault), function, alice)
    assert seen == [STORE_FAILED, {"sum": 42}]
    assert "CANARY" not in caplog.text and not vault.has_rows(alice, "t1")


def invalid(run, match: str) -> None:
    """``run()`` ends the run with InvalidArgument (the Agents SDK wraps a tool's exception in UserError)."""
    with pytest.raises(Exception) as raised:  # its cause is checked below
        run()
    error = raised.value
    while not isinstance(error, InvalidArgument) and error.__cause__ is not None:
        error = error.__cause__
    assert isinstance(error, InvalidArgument) and match in str(error), raised.value


class BadSteps(openai_agents.TurnContext):
    """An application's run context whose step counter is broken."""

    def next_step(self):
        return -1


def test_a_step_the_run_context_gives_that_is_no_step_raises_like_a_bad_principal(vault, alice):
    invalid(lambda: run_agents(Scratchpad(vault), rows, BadSteps(alice, "t1")), "step_num")


@pytest.mark.parametrize("framework", RUNS)
def test_sound_a_fault_on_models_is_store_failed_by_type_and_a_bad_turn_raises(db_path, alice, caplog, framework):
    broken = FaultyVault(db_path, "keyring down")
    broken.strike()
    try:
        with caplog.at_level(logging.DEBUG):
            assert RUNS[framework](Scratchpad(broken.vault), rows, alice) == [STORE_FAILED, {"sum": 42}]
        assert FAULTS["keyring down"] in caplog.text and "CANARY" not in caplog.text
        invalid(lambda: RUNS[framework](Scratchpad(broken.vault), rows, alice, ""), "turn_id")
    finally:
        broken.vault.close()
