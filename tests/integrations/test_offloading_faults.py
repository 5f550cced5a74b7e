"""A tool result the vault cannot keep (a vault fault, or a value it refuses such as NaN) through the
pydantic-ai and LangChain offloading wrappers. As in the Agents SDK adapter, and as ``tools``/``call_tool`` answer
a fault, the model gets STORE_FAILED and the run goes on; the result's content shows nowhere (not in the answer,
not in a log line). Neither the vault's exception nor a small NaN result, which the framework alone would show,
ends the run."""

from __future__ import annotations

import logging

import pytest
from langchain_core.tools import tool
from pydantic_ai import Agent
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from keys.testing import MemoryKeyring
from tests.integrations import langgraph_script as lc
from tests.integrations import test_pydantic_ai as pa
from vault import InvalidArgument, Vault
from vault.engine import STORE_FAILED, Scratchpad
from vault.integrations.langchain import offloading
from vault.integrations.pydantic_ai import OffloadingToolset

SECRET = "CANARY-result " * 800


def fetch_secret() -> str:
    """A large text result."""
    return SECRET


def measure() -> dict:
    """A small result holding NaN, which the vault does not store as JSON."""
    return {"reading": float("nan"), "label": "CANARY"}


CASES = {"a vault fault": (fetch_secret, True), "a NaN result": (measure, False)}


@pytest.fixture(params=CASES.values(), ids=CASES.keys())
def case(request, db_path):
    function, closed = request.param
    vault = Vault.open(db_path, keyring_backend=MemoryKeyring())
    if closed:
        vault.close()
    yield function, Scratchpad(vault)
    vault.close()


def test_pydantic_ai_answers_store_failed_and_the_run_goes_on(case, alice, caplog):
    function, pad = case
    script = pa.Script((function.__name__, {}), ("calc", {}))
    own = FunctionToolset([function, pa.calc])
    agent = Agent(FunctionModel(script), deps_type=pa.Deps, toolsets=[OffloadingToolset(own, pad=pad)])
    with caplog.at_level(logging.DEBUG):
        assert agent.run_sync("go", deps=pa.Deps(alice, "t1")).output == "done"
    assert script.seen(0) == STORE_FAILED and script.seen(1) == {"sum": 42}
    assert "CANARY" not in caplog.text


def test_langchain_answers_store_failed_and_the_run_goes_on(case, alice, caplog):
    function, pad = case
    model = lc.Script(steps=[lc.call(function.__name__), lc.call("calc")])
    tools = offloading(pad, [tool(function), lc.calc])

    def agent(state, runtime):
        return {"messages": [model.bind_tools(tools).invoke(state["messages"])]}
    with caplog.at_level(logging.DEBUG):
        final = lc.react(agent, tools).invoke({"messages": [("user", "go")]}, context=lc.Turn(alice, "t1"))
    assert final["messages"][-1].content == "done"
    assert model.seen(0) == STORE_FAILED and model.seen(1) == {"sum": 42}
    assert "CANARY" not in caplog.text


def test_a_bad_principal_is_still_the_runtimes_error_not_a_store_failure(vault):
    script = pa.Script(("fetch_secret", {}))
    own = OffloadingToolset(FunctionToolset([fetch_secret]), pad=Scratchpad(vault))
    with pytest.raises(InvalidArgument, match="principal"):
        Agent(FunctionModel(script), toolsets=[own]).run_sync("go", deps=pa.Deps("alice", "t1"))
