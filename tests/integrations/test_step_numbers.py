"""One step rule for every adapter: a tool result's ``step_num`` is its place among the results of the turn that
went through ``observe`` (stored or shown inline), 1, 2, 3, ... in the order they arrived; two calls of one model
response get two numbers. Driven through each real framework, offline."""

from __future__ import annotations

import asyncio
import json

import pytest
from agents import Agent as AgentsAgent
from agents import ModelResponse as AgentsResponse
from agents import Runner, Usage
from langchain_core.messages import AIMessage
from openai.types.responses import ResponseFunctionToolCall
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from tests.integrations import langgraph_script, test_openai_agents
from tests.integrations.test_pydantic_ai import Deps, calc, fetch_page, list_files
from vault.engine import Scratchpad
from vault.integrations import openai_agents
from vault.integrations.pydantic_ai import OffloadingToolset


@pytest.fixture
def pad(vault):
    return Scratchpad(vault, threshold_bytes=4096)


def stored_steps(vault, principal, turn_id: str = "t1") -> list[int]:
    return sorted(rep.step_num for rep in vault.list_for_turn(principal, turn_id))


def test_pydantic_ai_numbers_two_calls_of_one_response_apart(pad, vault, alice):
    responses = [[("list_files", {}), ("fetch_page", {})], [("calc", {})], [("fetch_page", {})]]

    def model(messages, info) -> ModelResponse:
        if not responses:
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart(name, args) for name, args in responses.pop(0)])

    toolset = OffloadingToolset(FunctionToolset([list_files, fetch_page, calc]), pad=pad)
    Agent(FunctionModel(model), deps_type=Deps, toolsets=[toolset]).run_sync("go", deps=Deps(alice, "t1"))
    assert stored_steps(vault, alice) == [1, 2, 4]  # calc (3) was small: shown inline, counted all the same
    responses.append([("fetch_page", {})])
    Agent(FunctionModel(model), deps_type=Deps, toolsets=[toolset]).run_sync("go", deps=Deps(alice, "t2"))
    assert stored_steps(vault, alice, "t2") == [1]  # another turn counts from 1


def test_langgraph_numbers_results_1_2_3_not_by_its_internal_step(pad, vault, alice):
    both = AIMessage("", tool_calls=[{"name": "fetch_page", "args": {}, "id": "a"},
                                     {"name": "list_files", "args": {}, "id": "b"}])
    langgraph_script.run(pad, alice, lambda s: both, langgraph_script.call("calc"),
                         langgraph_script.call("fetch_page"))
    assert stored_steps(vault, alice) == [1, 2, 4]


def test_the_agents_sdk_follows_the_same_rule(pad, vault, alice):
    class TwoAtOnce(test_openai_agents.ScriptedModel):
        async def get_response(self, *args, **kwargs):
            if self.script and self.script[0] == "both":
                self.script.pop(0)
                calls = [ResponseFunctionToolCall(type="function_call", call_id=f"both{i}", name="fetch_report",
                                                  arguments="{}", status="completed") for i in (1, 2)]
                return AgentsResponse(output=calls, usage=Usage(), response_id=None)
            return await super().get_response(*args, **kwargs)

    model = TwoAtOnce(["both", ("fetch_report", {}), "done"])
    agent = AgentsAgent(name="a", model=model, tools=openai_agents.offloading(pad, [test_openai_agents.fetch_report]))
    asyncio.run(Runner.run(agent, "go", context=openai_agents.TurnContext(alice, "t1")))
    assert stored_steps(vault, alice) == [1, 2, 3]
    assert sorted(json.loads(output)["step_num"] for output in model.outputs) == [1, 2, 3]  # what the model saw
