"""The pydantic-ai adapter (vault/integrations/pydantic_ai.py) driven by pydantic-ai's own agent loop, offline: a
``FunctionModel`` scripts the model's tool calls and records which tools each request offered.

Through the framework: results of other tools offloaded (JSON kept as json), head/tail/range reads, the principal
from the run's deps (another user of the same turn id gets NOT_FOUND, a ``principal`` argument is refused), any
arguments answered as ``Scratchpad.call_tool`` answers them, and a vault fault that neither kills the run nor
shows. The README's ``### pydantic-ai`` example runs as written.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import types
from dataclasses import dataclass

import pytest
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from keys.testing import MemoryKeyring
from tests.support.down_keyring import FAULTS, FaultyVault
from tests.support.readme import readme_block
from tests.support.repository import ROOT
from vault import InvalidArgument, Principal, TrialKeyringWarning, Vault
from vault.engine import FAULT, NOT_FOUND, OFFLOADED_KEYS, STORE_FAILED, Scratchpad, tool_declaration
from vault.integrations.pydantic_ai import OffloadingToolset, ScratchpadToolset

LISTING = {"results": [{"path": f"/srv/f{i:04}.csv", "size": i} for i in range(400)]}
PAGE = "<p>figures</p>\n" * 999


@dataclass
class Deps:
    principal: Principal
    turn_id: str


class Row(BaseModel):
    path: str
    size: int


def list_files() -> dict:
    """A tool with a large JSON result."""
    return LISTING


def fetch_page() -> str:
    """A tool with a large text result."""
    return PAGE


def list_rows() -> list[Row]:
    """A tool returning pydantic models: stored as the JSON the model would have seen."""
    return [Row(**row) for row in LISTING["results"]]


def calc() -> dict:
    """A tool with a small result, shown as is."""
    return {"sum": 42}


def toolsets(pad: Scratchpad) -> list:
    """What an application passes to its Agent: the read tool and its own tools behind the offloading wrapper."""
    own = FunctionToolset([list_files, fetch_page, list_rows, calc])
    return [ScratchpadToolset(pad), OffloadingToolset(own, pad=pad)]


class Script:
    """The model: each request answers the next scripted call (a function of the tool results so far); records
    the tools each request offered and every tool result as the model received it."""

    def __init__(self, *calls, final=lambda script: "done") -> None:
        self.calls, self.final, self.offered, self.results = list(calls), final, [], []

    def __call__(self, messages, info) -> ModelResponse:
        self.offered.append(sorted(tool.name for tool in info.function_tools))
        self.results += [part for part in messages[-1].parts if isinstance(part, ToolReturnPart)]
        if not self.calls:
            return ModelResponse(parts=[TextPart(self.final(self))])
        name, args = self.calls.pop(0)
        return ModelResponse(parts=[ToolCallPart(name, args(self) if callable(args) else args)])

    def seen(self, index: int):
        """The index-th tool result as JSON, parsed from the very text the model was given."""
        return json.loads(self.results[index].model_response_str())

    def stored_id(self, index: int = 0) -> str:
        return self.seen(index)["id"]


def run(pad: Scratchpad, principal: Principal, script: Script, turn_id: str = "t1") -> str:
    agent = Agent(FunctionModel(script), deps_type=Deps, toolsets=toolsets(pad))
    return agent.run_sync("go", deps=Deps(principal, turn_id)).output


@pytest.fixture
def pad(vault):
    return Scratchpad(vault, threshold_bytes=4096)


def test_large_results_are_stored_json_as_json_and_read_through_the_tool(pad, vault, alice):
    script = Script(("list_files", {}), ("calc", {}),
                    ("scratchpad_read", lambda s: {"id": s.stored_id(), "mode": "head", "n": 12}),
                    ("scratchpad_read", lambda s: json.dumps({"id": s.stored_id(), "mode": "tail", "n": 3})),
                    ("scratchpad_read", lambda s: {"id": s.stored_id(), "mode": "range", "start": 2, "end": 9}))
    assert run(pad, alice, script) == "done"
    stored = script.seen(0)
    assert set(stored) == OFFLOADED_KEYS and stored["content_kind"] == "json"
    assert vault.get(alice, stored["id"]).content == LISTING  # the dict itself, not its JSON text
    assert script.seen(1) == {"sum": 42}
    text = json.dumps(LISTING, ensure_ascii=False)  # the stored JSON text, in its units
    assert [script.seen(i)["content"] for i in (2, 3, 4)] == [text[:12], text[-3:], text[2:9]]
    assert script.offered[0] == ["calc", "fetch_page", "list_files", "list_rows"]  # nothing stored yet
    assert all("scratchpad_read" in offered for offered in script.offered[1:])


@pytest.mark.parametrize(("tool", "kind"), [("fetch_page", "text"), ("list_rows", "json")])
def test_text_stays_text_and_models_are_stored_as_their_json(pad, vault, alice, tool, kind):
    script = Script((tool, {}))
    run(pad, alice, script)
    stored = vault.get(alice, script.stored_id())
    assert stored.content_kind == kind
    assert stored.content == (PAGE if kind == "text" else LISTING["results"])


def test_tool_results_reach_the_model_as_call_tool_json(pad, alice):
    script = Script(("fetch_page", {}), ("scratchpad_read", lambda s: {"id": s.stored_id(), "n": 14}))
    run(pad, alice, script)
    assert script.results[1].model_response_str() == json.dumps(
        pad.call_tool(alice, "t1", {"id": script.stored_id(), "n": 14}), separators=(",", ":"))


def test_the_tool_schema_is_the_declaration(pad, alice):
    schemas = []

    def model(messages, info):
        schemas.extend(tool.parameters_json_schema for tool in info.function_tools if tool.name == "scratchpad_read")
        return ModelResponse(parts=[TextPart("done")])
    pad.observe(alice, "t1", 1, "tool", PAGE)
    Agent(FunctionModel(model), deps_type=Deps, toolsets=toolsets(pad)).run_sync("go", deps=Deps(alice, "t1"))
    assert schemas == [tool_declaration("neutral")["parameters"]]


def test_another_user_of_the_same_turn_id_gets_not_found(pad, alice, bob):
    first = Script(("fetch_page", {}))
    run(pad, alice, first)
    script = Script(("calc", {}), ("fetch_page", {}), ("scratchpad_read", {"id": first.stored_id()}))
    run(pad, bob, script)  # bob has rows of his own in t1, so the tool is offered to him
    assert script.seen(2) == NOT_FOUND
    assert script.offered[1] == ["calc", "fetch_page", "list_files", "list_rows"]  # nothing of bob's stored yet


@pytest.mark.parametrize("field", ["principal", "user_id", "owner", "deps", "ctx", "self"])
def test_arguments_naming_a_principal_are_refused(pad, alice, bob, field):
    run(pad, bob, Script(("fetch_page", {})))
    script = Script(("fetch_page", {}), ("scratchpad_read", lambda s: {"id": s.stored_id(), field: "bob"}))
    run(pad, alice, script)
    assert script.seen(1)["error"].startswith(f"invalid arguments: unknown argument(s): '{field}'")


@pytest.mark.parametrize("arguments", ["[1, 2]", "null", "42", '"x"', "{bad", "[]", '{"id": null}',
                                       '{"id": "%s", "mode": "head", "start": null}', {"id": 7}, {"n": "x"}])
def test_any_arguments_get_call_tools_answer(pad, alice, arguments):
    """pydantic-ai validates arguments before a tool runs (a wrong shape becomes a retry, a non-object a crash of
    ``**args``): the adapter hands them on untouched, so the model gets exactly call_tool's answer."""
    script = Script(("fetch_page", {}), ("scratchpad_read", arguments), ("calc", {}))
    assert run(pad, alice, script) == "done"
    assert script.seen(1) == pad.call_tool(alice, "t1", arguments)
    assert "error" in script.seen(1) and script.seen(2) == {"sum": 42}  # and the run went on


def test_a_vault_fault_when_offering_neither_kills_the_run_nor_shows(db_path, alice):
    """``Scratchpad.tools`` may raise on a vault fault (a closed vault here) where call_tool answers FAULT: the
    offering hook logs it and leaves the tool out, and the run goes on."""
    vault = Vault.open(db_path, keyring_backend=MemoryKeyring())
    pad = Scratchpad(vault)

    def close(script):
        vault.close()  # the fault strikes between the offer and the call
        return {"id": script.stored_id()}
    script = Script(("fetch_page", {}), ("scratchpad_read", close))
    assert run(pad, alice, script) == "done"
    assert script.seen(1) == FAULT
    assert script.offered == [["calc", "fetch_page", "list_files", "list_rows"],
                              ["calc", "fetch_page", "list_files", "list_rows", "scratchpad_read"],
                              ["calc", "fetch_page", "list_files", "list_rows"]]


@pytest.mark.parametrize("fault", FAULTS)
def test_a_result_the_vault_cannot_keep_is_store_failed_and_the_run_goes_on(db_path, alice, caplog, fault):
    """Offloading fails soft like ``call_tool``: the model gets STORE_FAILED (never the large result inline), the
    fault is logged by its type only, and the run goes on."""
    broken = FaultyVault(db_path, fault)
    broken.strike()
    script = Script(("fetch_page", {}), ("list_files", {}), ("calc", {}))
    with caplog.at_level(logging.WARNING):
        assert run(Scratchpad(broken.vault), alice, script) == "done"
    assert [script.seen(i) for i in range(3)] == [STORE_FAILED, STORE_FAILED, {"sum": 42}]
    assert FAULTS[fault] in caplog.text and "figures" not in caplog.text and "/srv/" not in caplog.text
    broken.vault.close()


def test_deps_without_a_principal_are_the_runtimes_error(pad):
    agent = Agent(FunctionModel(Script()), toolsets=toolsets(pad))
    with pytest.raises(InvalidArgument, match="deps must carry"):
        agent.run_sync("go", deps={"principal": "alice", "turn_id": "t1"})


def test_a_context_getter_can_supply_the_turn(pad, alice):
    first = Script(("fetch_page", {}))
    run(pad, alice, first)
    script = Script(("scratchpad_read", {"id": first.stored_id(), "n": 3}))
    tool = ScratchpadToolset(pad, context=lambda ctx: (ctx.deps["who"], ctx.deps["turn"]))
    Agent(FunctionModel(script), toolsets=[tool]).run_sync("go", deps={"who": alice, "turn": "t1"})
    assert script.seen(0)["content"] == "<p>"


# -- the README example --------------------------------------------------------------------------------
SNIPPET = readme_block("### pydantic-ai")


def test_readme_example_runs_as_written_with_the_trial_keyring(capsys, monkeypatch):
    model = '"openai:gpt-5.2"'
    assert SNIPPET.count(model) == 1 and SNIPPET.count('keyring_backend="memory"') == 1
    assert len(SNIPPET.strip().splitlines()) <= 32
    script = Script(("fetch_report", {}), ("scratchpad_read", lambda s: {"id": s.stored_id(), "n": 14}),
                    final=lambda s: s.seen(1)["content"])
    code = SNIPPET.replace(model, "readme_model")  # the one change: a scripted model in place of the provider's
    module = types.ModuleType("readme_pydantic_ai")  # a real module: the example's dataclass looks itself up
    monkeypatch.setitem(sys.modules, module.__name__, module)
    module.__dict__.update(readme_model=FunctionModel(script))
    with pytest.warns(TrialKeyringWarning):
        exec(compile(code, "README-pydantic-ai", "exec"), module.__dict__)
    assert capsys.readouterr().out == "<p>figures</p>\n"  # the 14 characters read through the tool


def test_the_example_runs_two_users_apart():
    command = [sys.executable, "examples/pydantic_ai_agent.py", "--memory-keyring"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert '"content_kind": "json"' in result.stdout and "[alice] model sees: {\"id\"" in result.stdout
    assert "bob's model used alice's id and got not found" in result.stdout
