"""The LangChain/LangGraph adapter (vault/integrations/langchain.py) in a real LangGraph ReAct graph (StateGraph,
ToolNode, tools_condition), offline: a chat model scripts its tool calls and records which tools each call bound.

Through the framework: results of other tools offloaded with JSON kept as json (the ToolNode wrap point would
store JSON text), head/tail/range reads, the principal from the graph's context (another user of the same turn id
gets NOT_FOUND, a ``principal`` argument is refused), any arguments (even those LangChain cannot parse) answered
as ``Scratchpad.call_tool`` answers them, and a vault fault when offering that neither kills the run nor shows.
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
import types

import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.graph import MessagesState
from langgraph.prebuilt import ToolRuntime
from langgraph.runtime import Runtime

from keys.testing import MemoryKeyring
from tests.integrations.langgraph_script import LISTING, OWN, PAGE, Script, Turn, call, graph, react, run
from tests.support.down_keyring import FAULTS, FaultyVault
from tests.support.readme import readme_block
from tests.support.repository import ROOT
from vault import InvalidArgument, TrialKeyringWarning, Vault
from vault.engine import FAULT, NOT_FOUND, OFFLOADED_KEYS, STORE_FAILED, Scratchpad, tool_declaration
from vault.integrations.langchain import aoffered, offered, offloading, scratchpad_read_tool


@pytest.fixture
def pad(vault):
    return Scratchpad(vault, threshold_bytes=4096)


def test_large_results_are_stored_json_as_json_and_read_through_the_tool(pad, vault, alice):
    """At ToolNode's wrap point a dict result is already JSON text; each tool is wrapped instead, so the
    stored row is the dict (content_kind json), and the model sees the representation as JSON."""
    model = run(pad, alice, call("list_files"), call("calc"),
                call("scratchpad_read", lambda s: {"id": s.stored_id(), "mode": "head", "n": 12}),
                call("scratchpad_read", lambda s: {"id": s.stored_id(), "mode": "tail", "n": 3}),
                call("scratchpad_read", lambda s: {"id": s.stored_id(), "mode": "range", "start": 2, "end": 9}))
    stored = model.seen(0)
    assert set(stored) == OFFLOADED_KEYS and stored["content_kind"] == "json"
    assert vault.get(alice, stored["id"]).content == LISTING
    assert model.seen(1) == {"sum": 42}
    text = json.dumps(LISTING, ensure_ascii=False)  # the stored JSON text, in its units
    assert [model.seen(i)["content"] for i in (2, 3, 4)] == [text[:12], text[-3:], text[2:9]]
    assert model.offered[0] == OWN  # nothing stored yet
    assert all("scratchpad_read" in tools for tools in model.offered[1:])


@pytest.mark.parametrize(("name", "kind", "content"), [("fetch_page", "text", PAGE),
                                                       ("list_rows", "json", LISTING["results"])])
def test_text_stays_text_and_models_are_stored_as_their_json(pad, vault, alice, name, kind, content):
    model = run(pad, alice, call(name))
    stored = vault.get(alice, model.stored_id())
    assert (stored.content_kind, stored.content) == (kind, content)


def test_the_model_gets_the_declarations_schema_and_call_tools_json(pad, alice):
    declared = convert_to_openai_tool(scratchpad_read_tool(pad))["function"]
    assert declared["parameters"] == tool_declaration("neutral")["parameters"]
    model = run(pad, alice, call("fetch_page"), call("scratchpad_read", lambda s: {"id": s.stored_id(), "n": 14}))
    assert model.seen(1) == pad.call_tool(alice, "t1", {"id": model.stored_id(), "n": 14})


def test_another_user_of_the_same_turn_id_gets_not_found(pad, alice, bob):
    first = run(pad, alice, call("fetch_page"))
    model = run(pad, bob, call("calc"), call("fetch_page"), call("scratchpad_read", {"id": first.stored_id()}))
    assert model.seen(2) == NOT_FOUND
    assert model.offered[1] == OWN  # nothing of bob's stored yet


@pytest.mark.parametrize("field", ["principal", "user_id", "runtime", "context"])
def test_arguments_naming_a_principal_are_refused(pad, alice, bob, field):
    run(pad, bob, call("fetch_page"))
    model = run(pad, alice, call("fetch_page"),
                call("scratchpad_read", lambda s: {"id": s.stored_id(), field: Turn(bob, "t1").__dict__}))
    assert model.seen(1)["error"].startswith(f"invalid arguments: unknown argument(s): '{field}'")


def unparsed(raw: str | None):
    """The message LangChain makes of a tool call whose arguments are not a JSON object: an invalid_tool_call."""
    return lambda script: AIMessage("", invalid_tool_calls=[
        {"name": "scratchpad_read", "args": raw, "id": "bad1", "error": None, "type": "invalid_tool_call"}])


ARGUMENTS = {"array": unparsed("[1, 2]"), "null": unparsed("null"), "string": unparsed('"x"'),
             "bad json": unparsed("{bad"), "none": unparsed(None), "null id": call("scratchpad_read", {"id": None}),
             "empty": call("scratchpad_read"), "null start": call("scratchpad_read", {"id": "a", "start": None}),
             "wrong types": call("scratchpad_read", {"id": 7, "n": "x"})}


@pytest.mark.parametrize("step", ARGUMENTS.values(), ids=ARGUMENTS.keys())
def test_any_arguments_get_call_tools_answer(pad, alice, step):
    """LangGraph drops calls LangChain could not parse (no ToolMessage, the graph just ends) and would validate
    a pydantic args_schema with its own messages: here each gets call_tool's answer and the run goes on."""
    model = run(pad, alice, call("fetch_page"), step, call("calc"))
    made = step(Script(steps=[]))  # the arguments the model sent, raw
    raw = made[1] if isinstance(made, tuple) else made.invalid_tool_calls[0]["args"]
    assert model.seen(1) == pad.call_tool(alice, "t1", raw)
    assert "error" in model.seen(1) and model.seen(2) == {"sum": 42}


def test_a_vault_fault_when_offering_neither_kills_the_run_nor_shows(db_path, alice):
    """``Scratchpad.tools`` may raise on a vault fault (a closed vault here) where call_tool answers FAULT:
    ``offered`` logs it and leaves the tool out, and the run goes on."""
    vault = Vault.open(db_path, keyring_backend=MemoryKeyring())
    pad = Scratchpad(vault)

    def close(script):
        vault.close()  # the fault strikes between the offer and the call
        return "scratchpad_read", {"id": script.stored_id()}
    model = run(pad, alice, call("fetch_page"), close)
    assert model.seen(1) == FAULT
    assert model.offered == [OWN, [*OWN, "scratchpad_read"], OWN]


@pytest.mark.parametrize("fault", FAULTS)
def test_a_result_the_vault_cannot_keep_is_store_failed_and_the_run_goes_on(db_path, alice, caplog, fault):
    """Offloading fails soft like ``call_tool``: the model gets STORE_FAILED (never the large result inline), the
    fault is logged by its type only, and the run goes on."""
    broken = FaultyVault(db_path, fault)
    broken.strike()
    with caplog.at_level(logging.WARNING):
        model = run(Scratchpad(broken.vault), alice, call("fetch_page"), call("list_files"), call("calc"))
    assert [model.seen(i) for i in range(3)] == [STORE_FAILED, STORE_FAILED, {"sum": 42}]
    assert FAULTS[fault] in caplog.text and "figures" not in caplog.text and "/srv/" not in caplog.text
    broken.vault.close()


def test_without_a_principal_in_the_context_the_tools_refuse_to_guess(pad):
    with pytest.raises(InvalidArgument, match="context must carry"):
        graph(pad, Script(steps=[])).invoke({"messages": [("user", "go")]}, context=types.SimpleNamespace(turn_id="t1"))
    with pytest.raises(InvalidArgument, match="inside a LangGraph graph"):  # no graph, no context
        scratchpad_read_tool(pad).invoke({"id": "0" * 32})


def test_async_tools_and_runs_keep_the_turn(pad, vault, alice):
    @tool
    async def list_later() -> dict:
        """An async tool with a large JSON result."""
        return LISTING
    model = Script(steps=[call("list_later"), call("scratchpad_read", lambda s: {"id": s.stored_id(), "n": 12})])
    tools = [*offloading(pad, [list_later]), scratchpad_read_tool(pad)]

    async def agent(state: MessagesState, runtime: Runtime[Turn]):
        bound = model.bind_tools(await aoffered(pad, runtime, tools))
        return {"messages": [await bound.ainvoke(state["messages"])]}
    asyncio.run(react(agent, tools).ainvoke({"messages": [("user", "go")]}, context=Turn(alice, "t1")))
    assert vault.get(alice, model.stored_id()).content == LISTING
    assert model.seen(1)["content"] == json.dumps(LISTING)[:12]


# LangChain's own validation of a ToolRuntime argument warns about a dataclass context, wrapped or not
@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")
def test_wrapped_tools_keep_what_langgraph_injects(pad, vault, alice):
    @tool
    def whoami(runtime: ToolRuntime) -> dict:
        """A tool reading the graph's context through the ToolRuntime LangGraph injects."""
        return {"user": runtime.context.principal.user_id, "padding": "x" * 5000}
    model = Script(steps=[call("whoami", {"runtime": "forged"})])
    tools = offloading(pad, [whoami])

    def agent(state: MessagesState, runtime: Runtime[Turn]):
        return {"messages": [model.bind_tools(offered(pad, runtime, tools)).invoke(state["messages"])]}
    react(agent, tools).invoke({"messages": [("user", "go")]}, context=Turn(alice, "t1"))
    assert vault.get(alice, model.stored_id()).content["user"] == "alice"


# -- the README example --------------------------------------------------------------------------------
SNIPPET = readme_block("#### A graph of your own")


def test_readme_example_runs_as_written_with_the_trial_keyring(capsys, monkeypatch):
    assert SNIPPET.count('keyring_backend="memory"') == 1
    swaps = {'init_chat_model("openai:gpt-5.2")': "readme_model"}
    code = SNIPPET
    for old, new in swaps.items():
        assert code.count(old) == 1
        code = code.replace(old, new)
    model = Script(steps=[call("fetch_report"), call("scratchpad_read", lambda s: {"id": s.stored_id(), "n": 14}),
                          lambda s: AIMessage(s.seen(1)["content"])])
    module = types.ModuleType("readme_langchain")  # a real module: the example's dataclass looks itself up
    monkeypatch.setitem(sys.modules, module.__name__, module)
    module.__dict__.update(readme_model=model)
    with pytest.warns(TrialKeyringWarning):
        exec(compile(code, "README-langchain", "exec"), module.__dict__)
    assert capsys.readouterr().out == "<p>figures</p>\n"  # the 14 characters read through the tool
    assert model.offered == [["fetch_report"], ["fetch_report", "scratchpad_read"], ["fetch_report", "scratchpad_read"]]


def test_the_example_runs_two_users_apart():
    command = [sys.executable, "examples/langgraph_agent.py", "--memory-keyring"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert '"content_kind": "json"' in result.stdout and "[alice] model sees: {\"id\"" in result.stdout
    assert "bob's model used alice's id and got not found" in result.stdout
