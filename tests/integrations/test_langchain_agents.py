"""The middleware for LangChain 1.x's ``create_agent`` (vault/integrations/langchain_agents.py), in a real agent,
offline: a chat model scripts its calls and records which tools each call bound. ``scratchpad_read`` is bound only
while the run's user has rows in the turn; unparsable read calls get ``call_tool``'s answer instead of being
dropped; the principal comes from the agent's context, never from the model; the README's quick start runs."""

from __future__ import annotations

import asyncio
import sys
import types

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage

from tests.integrations.langgraph_script import PAGE, Script, Turn, call, fetch_page
from tests.support.readme import readme_block
from vault import InvalidArgument, TrialKeyringWarning
from vault.engine import NOT_FOUND, AsyncScratchpad, Scratchpad
from vault.integrations.langchain import offloading
from vault.integrations.langchain_agents import ScratchpadMiddleware


@pytest.fixture
def pad(vault):
    return Scratchpad(vault, threshold_bytes=4096)


def run(pad, principal, *steps, turn_id: str = "t1", asynchronous: bool = False) -> Script:
    model = Script(steps=list(steps))
    agent = create_agent(model, offloading(pad, [fetch_page]), middleware=[ScratchpadMiddleware(pad)],
                         context_schema=Turn)
    start, context = {"messages": [("user", "go")]}, Turn(principal, turn_id)
    final = asyncio.run(agent.ainvoke(start, context=context)) if asynchronous else agent.invoke(start,
                                                                                                  context=context)
    assert final["messages"][-1].content == "done"
    return model


@pytest.mark.parametrize("asynchronous", [False, True], ids=["invoke", "ainvoke"])
def test_the_read_tool_is_bound_only_once_the_user_has_rows_in_the_turn(pad, alice, asynchronous):
    model = run(pad, alice, call("fetch_page"), call("scratchpad_read", lambda s: {"id": s.stored_id(), "n": 9}),
                asynchronous=asynchronous)
    assert model.seen(1)["content"] == PAGE[:9]
    assert model.offered == [["fetch_page"], ["fetch_page", "scratchpad_read"], ["fetch_page", "scratchpad_read"]]


def test_unparsable_read_calls_are_answered_not_dropped(pad, alice):
    bad = AIMessage("", invalid_tool_calls=[{"name": "scratchpad_read", "args": "{bad", "id": "bad1", "error": None,
                                             "type": "invalid_tool_call"}])
    model = run(pad, alice, call("fetch_page"), lambda s: bad)
    assert model.seen(1) == pad.call_tool(alice, "t1", "{bad") and "error" in model.seen(1)


def test_another_user_of_the_same_turn_gets_not_found_and_naming_a_user_is_refused(pad, alice, bob):
    alices = run(pad, alice, call("fetch_page"))
    model = run(pad, bob, call("fetch_page"), call("scratchpad_read", {"id": alices.stored_id()}),
                call("scratchpad_read", {"id": alices.stored_id(), "principal": "alice"}))
    assert model.seen(1) == NOT_FOUND
    assert "unknown argument" in model.seen(2)["error"]


def test_an_async_pad_works_too(vault, alice):
    async_pad = AsyncScratchpad(vault, threshold_bytes=4096)
    model = run(async_pad, alice, call("fetch_page"), call("scratchpad_read", lambda s: {"id": s.stored_id()}),
                asynchronous=True)
    assert model.seen(1)["content"].startswith(PAGE[:20])
    asyncio.run(async_pad.close())


def test_the_middleware_takes_only_a_pad():
    with pytest.raises(InvalidArgument, match="Scratchpad or an AsyncScratchpad"):
        ScratchpadMiddleware(object())


def test_the_readme_quick_start_runs_as_written_with_the_trial_keyring(capsys, monkeypatch):
    snippet = readme_block("### LangChain and LangGraph")
    assert snippet.count('model="openai:gpt-5.2"') == 1 and snippet.count('keyring_backend="memory"') == 1
    model = Script(steps=[call("fetch_report"), call("scratchpad_read", lambda s: {"id": s.stored_id(), "n": 14}),
                          lambda s: AIMessage(s.seen(1)["content"])])
    module = types.ModuleType("readme_create_agent")  # a real module: the example's dataclass looks itself up
    monkeypatch.setitem(sys.modules, module.__name__, module)
    module.__dict__["readme_model"] = model
    with pytest.warns(TrialKeyringWarning):
        exec(compile(snippet.replace('model="openai:gpt-5.2"', "model=readme_model"), "README", "exec"),
             module.__dict__)
    assert capsys.readouterr().out == "<p>figures</p>\n"
    assert model.offered == [["fetch_report"], ["fetch_report", "scratchpad_read"], ["fetch_report", "scratchpad_read"]]
