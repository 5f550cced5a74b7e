"""The OpenAI Agents SDK adapter, end to end through the real SDK's Runner with a scripted ``Model`` (no network,
no tracing): the tool in strict mode (the SDK's default) takes what a strict model sends, results reach the model
as JSON, the principal comes from the run context, and nothing the model sends crashes the run.
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import agents
import pytest
from agents import Agent, FunctionTool, Model, ModelResponse, Runner, Usage, function_tool
from agents.models.openai_responses import Converter
from jsonschema import Draft202012Validator
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from tests.support.down_keyring import FAULTS, FaultyVault
from tests.support.readme import readme_block
from tests.support.repository import ROOT
from vault import InvalidArgument, TrialKeyringWarning, tool_declaration
from vault.engine import NOT_FOUND, STORE_FAILED, Scratchpad
from vault.integrations.openai_agents import TurnContext, offloading, scratchpad_read_tool

agents.set_tracing_disabled(True)
REPORT = {"rows": [{"n": i, "name": f"item {i:04}"} for i in range(400)]}  # about 11 KB of JSON
TEXT = json.dumps(REPORT, ensure_ascii=False)  # the units a JSON row is read in


class ScriptedModel(Model):
    """Plays a script of tool calls and a final answer; records what the SDK offered and sent at each call.
    ``strict_calls`` makes it behave as a strict-mode model: it can only emit arguments valid for the schema."""

    def __init__(self, script: list[Any], *, strict_calls: bool = False) -> None:
        self.script, self.strict_calls = list(script), strict_calls
        self.offered: list[list[FunctionTool]] = []
        self.outputs: list[str] = []  # every function_call_output the model was sent, in order

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs,
                           tracing, **_: Any) -> ModelResponse:
        self.offered.append([tool for tool in tools if isinstance(tool, FunctionTool)])
        self.outputs = [item["output"] for item in input if isinstance(item, dict)
                        and item.get("type") == "function_call_output"]
        step = self.script.pop(0)
        if isinstance(step, str):
            item = ResponseOutputMessage(id="m", type="message", role="assistant", status="completed",
                                         content=[ResponseOutputText(type="output_text", text=step,
                                                                     annotations=[])])
            return ModelResponse(output=[item], usage=Usage(), response_id=None)
        name, arguments = step
        if callable(arguments):  # arguments that depend on what the model saw (e.g. an id)
            arguments = arguments(self.outputs)
        if self.strict_calls:
            schema = next(tool for tool in self.offered[-1] if tool.name == name).params_json_schema
            arguments = {**{field: unused(schema["properties"][field]) for field in schema["required"]}, **arguments}
            Draft202012Validator(schema).validate(arguments)
        raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
        call = ResponseFunctionToolCall(type="function_call", call_id=f"c{len(self.offered)}", name=name,
                                        arguments=raw, status="completed")
        return ModelResponse(output=[call], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("these tests do not stream")


def unused(field: dict) -> Any:
    """What a strict model must send for a field it has no use for: null where allowed, else the least value."""
    return None if "null" in field.get("type", []) else field.get("minimum", 0)


@function_tool
def fetch_report() -> dict:
    """Return the quarterly report."""
    return REPORT


def run(pad: Scratchpad, context: Any, script: list[Any], *, strict_calls: bool = False) -> ScriptedModel:
    model = ScriptedModel(script, strict_calls=strict_calls)
    agent = Agent(name="analyst", model=model, tools=[*offloading(pad, [fetch_report]), scratchpad_read_tool(pad)])
    asyncio.run(Runner.run(agent, "summarise the report", context=context))
    return model


def stored_id(outputs: list[str]) -> str:
    return json.loads(outputs[0])["id"]


def read(mode: str, **fields: int) -> tuple:
    """A call of the id the first tool result gave; a strict model fills in the fields it does not use."""
    return ("scratchpad_read", lambda outputs: {"id": stored_id(outputs), "mode": mode, **fields})


@pytest.fixture
def pad(vault):
    return Scratchpad(vault)


# -- end to end in strict mode -------------------------------------------------------------------------
def test_a_strict_model_stores_through_the_wrapper_and_reads_head_tail_and_range(pad, vault, alice):
    model = run(pad, TurnContext(alice, "t1"), [("fetch_report", {}), read("head", n=12), read("tail", n=5),
                                                read("range", start=3, end=9), "done"], strict_calls=True)
    representation, *reads = (json.loads(output) for output in model.outputs)
    assert [result.get("content", result) for result in reads] == [TEXT[:12], TEXT[-5:], TEXT[3:9]]
    assert vault.get(alice, representation["id"]).content == REPORT  # stored as JSON, not as its text
    assert representation["content_kind"] == "json" and representation["step_num"] == 1
    assert [[tool.name for tool in tools] for tools in model.offered] == [
        ["fetch_report"]] + [["fetch_report", "scratchpad_read"]] * 4  # offered once there is something to read


def test_the_read_tool_is_declared_strict_and_the_sdk_sends_our_strict_schema_unchanged(pad):
    [sent] = Converter.convert_tools([scratchpad_read_tool(pad)], []).tools  # what goes to the Responses API
    assert sent["strict"] is True and "default" not in json.dumps(sent)
    assert [sent["parameters"]["properties"][field]["type"] for field in ("n", "start", "end")] == [
        ["integer", "null"]] * 3
    assert sent == tool_declaration("openai-responses", strict=True)
    lenient = scratchpad_read_tool(pad, strict=False)
    assert (lenient.strict_json_schema, lenient.params_json_schema) == (False, tool_declaration()["parameters"])


def test_results_reach_the_model_as_json_text_not_python_repr(pad, alice):
    model = run(pad, TurnContext(alice, "t1"), [("fetch_report", {}), read("head", n=3), "done"])
    for output in model.outputs:
        assert isinstance(json.loads(output), dict)
    assert "'" not in model.outputs[0] and '"id": "' in model.outputs[0]


# -- whose data --------------------------------------------------------------------------------------------
def test_another_principal_of_the_same_turn_gets_exactly_the_unknown_id_answer(pad, alice, bob):
    alices = run(pad, TurnContext(alice, "t1"), [("fetch_report", {}), "done"])
    row = stored_id(alices.outputs)
    pad.observe(bob, "t1", 1, "tool", "b" * 5000)  # Bob has rows of his own in t1, so he is offered the tool
    bobs = run(pad, TurnContext(bob, "t1"), [("scratchpad_read", {"id": row, "mode": "head"}), "done"],
               strict_calls=True)
    assert bobs.outputs == [json.dumps(NOT_FOUND)]


def test_arguments_naming_a_principal_are_refused(pad, alice, bob):
    pad.observe(bob, "t1", 1, "tool", "b" * 5000)
    row = stored_id(run(pad, TurnContext(alice, "t1"), [("fetch_report", {}), "done"]).outputs)
    smuggled = {"id": row, "mode": "head", "n": 5, "start": None, "end": None, "principal": "alice",
                "user_id": "alice"}
    bobs = run(pad, TurnContext(bob, "t1"), [("scratchpad_read", smuggled), "done"])
    assert json.loads(bobs.outputs[0])["error"].startswith("invalid arguments: unknown argument")
    assert bobs.outputs == [json.dumps(pad.call_tool(bob, "t1", smuggled))]


@pytest.mark.parametrize("raw", ["[1, 2]", "null", "42", "not json", '"text"', '{"id": null}', "{}", "",
                                 '{"id": "x", "mode": null}', '{"id": "x", "start": 3}'])
def test_any_arguments_get_the_answer_call_tool_gives_and_the_run_goes_on(pad, alice, raw):
    model = run(pad, TurnContext(alice, "t1"), [("fetch_report", {}), ("scratchpad_read", raw), "done"])
    assert model.outputs[1] == json.dumps(pad.call_tool(alice, "t1", raw))
    assert json.loads(model.outputs[1])["error"].startswith("invalid arguments: ")


def test_a_run_without_a_turn_context_is_refused_loudly(pad, alice):
    with pytest.raises(InvalidArgument, match="run context"):
        run(pad, {"principal": "alice"}, ["done"])
    with pytest.raises(InvalidArgument):
        run(pad, TurnContext("alice", "t1"), ["done"])  # type: ignore[arg-type]


# -- faults ------------------------------------------------------------------------------------------------
def test_a_closed_vault_hides_the_tool_and_the_run_goes_on(pad, vault, alice):
    pad.observe(alice, "t1", 1, "tool", "a" * 5000)
    vault.close()
    model = run(pad, TurnContext(alice, "t1"), ["done"])
    assert [[tool.name for tool in tools] for tools in model.offered] == [["fetch_report"]]


@pytest.mark.parametrize("fault", FAULTS)
def test_a_result_the_vault_cannot_keep_is_store_failed_and_the_run_goes_on(db_path, alice, caplog, fault):
    """Offloading fails soft like ``call_tool``: the model gets STORE_FAILED (never the large result inline), the
    fault is logged by its type only, and the run goes on."""
    broken = FaultyVault(db_path, fault)
    broken.strike()
    with caplog.at_level(logging.WARNING):
        model = run(Scratchpad(broken.vault), TurnContext(alice, "t1"), [("fetch_report", {}), "done"])
    assert [json.loads(output) for output in model.outputs] == [STORE_FAILED]
    assert STORE_FAILED == {"error": "this tool's result could not be kept for reading; continue without it"}
    assert FAULTS[fault] in caplog.text and "item 0" not in caplog.text
    broken.vault.close()


def test_small_results_pass_as_json_and_text_as_text(pad, alice):
    @function_tool
    def small() -> dict:
        """A small result."""
        return {"ok": True}

    @function_tool
    def words() -> str:
        """A short text."""
        return "just text"

    model = ScriptedModel([("small", {}), ("words", {}), "done"])
    agent = Agent(name="a", model=model, tools=offloading(pad, [small, words]))
    asyncio.run(Runner.run(agent, "go", context=TurnContext(alice, "t1")))
    assert model.outputs == ['{"ok": true}', "just text"]


def test_offloading_takes_the_pad_then_a_list_of_tools_like_the_langchain_adapter(pad):
    with pytest.raises(InvalidArgument, match="pad must be"):
        offloading(fetch_report, pad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="tools must be a list"):
        offloading(pad, fetch_report)  # type: ignore[arg-type]


# -- README ------------------------------------------------------------------------------------------------

def test_the_readme_example_runs_as_written_with_the_trial_keyring(capsys):
    code = readme_block("### OpenAI Agents SDK")
    assert code.count('keyring_backend="memory"') == 1 and code.count('model="gpt-5.2"') == 1
    code = code.replace('"gpt-5.2"', "MODEL")
    model = ScriptedModel([("fetch_report", {"quarter": "Q3"}), read("head", n=22), "Q3: 5000 rows"],
                          strict_calls=True)
    with pytest.warns(TrialKeyringWarning):
        exec(compile(code, "README-openai-agents", "exec"), {"__name__": "readme", "MODEL": model})
    assert capsys.readouterr().out == "Q3: 5000 rows\n"
    assert json.loads(model.outputs[1])["content"] == '{"quarter": "Q3", "row'


def test_the_example_runs_two_users_apart():
    command = [sys.executable, "examples/openai_agents_agent.py", "--memory-keyring"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert '"content_kind": "json"' in result.stdout and '[alice] model sees: {"id"' in result.stdout
    assert '"n": 60, "start": null, "end": null}' in result.stdout  # a strict-mode call, answered
    assert "bob's model used alice's id and got not found" in result.stdout
