"""The Agents SDK offloading wrapper and tools returning pydantic models, taken as the pydantic-ai and LangChain
wrappers take them (their JSON value): a small list of models reaches the model as its JSON, not STORE_FAILED, and a
large model is offloaded, not shown whole."""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict, dataclass

from agents import Agent, Runner, ToolOutputText, function_tool
from pydantic import BaseModel

from tests.integrations.test_openai_agents import ScriptedModel
from vault.engine import OFFLOADED_KEYS, Scratchpad
from vault.integrations.openai_agents import TurnContext, offloading


class Row(BaseModel):
    path: str
    size: int


class Listing(BaseModel):
    rows: list[Row]


ROWS = [Row(path=f"/srv/f{i:04}.csv", size=i) for i in range(400)]


@function_tool
def two_rows() -> list[Row]:
    """A small result: two models."""
    return ROWS[:2]


@function_tool
def listing() -> Listing:
    """A large result: one model."""
    return Listing(rows=ROWS)


def test_models_are_stored_as_their_json_and_small_ones_shown_as_json(vault, alice):
    pad = Scratchpad(vault)
    model = ScriptedModel([("two_rows", {}), ("listing", {}), "done"])
    agent = Agent(name="a", model=model, tools=offloading(pad, [two_rows, listing]))
    asyncio.run(Runner.run(agent, "go", context=TurnContext(alice, "t1")))
    assert json.loads(model.outputs[0]) == [row.model_dump() for row in ROWS[:2]]
    stored = json.loads(model.outputs[1])
    assert set(stored) == OFFLOADED_KEYS and stored["content_kind"] == "json"
    assert vault.get(alice, stored["id"]).content == {"rows": [row.model_dump() for row in ROWS]}


@function_tool
def sdk_texts() -> list[ToolOutputText]:
    """The SDK's own structured output: passed to the SDK as it is, never stored."""
    return [ToolOutputText(text="x" * 5000)]


def test_the_sdks_own_outputs_still_pass_through(vault, alice):
    pad = Scratchpad(vault)
    model = ScriptedModel([("sdk_texts", {}), "done"])
    agent = Agent(name="a", model=model, tools=offloading(pad, [sdk_texts]))
    asyncio.run(Runner.run(agent, "go", context=TurnContext(alice, "t1")))
    assert model.outputs[0] == [{"type": "input_text", "text": "x" * 5000}]
    assert not vault.has_rows(alice, "t1")


@dataclass
class Entry:
    path: str
    size: int


ENTRIES = tuple(Entry(path=f"/srv/f{i:04}.csv", size=i) for i in range(400))


@function_tool
def entries_tuple() -> tuple:
    """A large result: a tuple of dataclasses."""
    return ENTRIES


@function_tool
def one_entry() -> Entry:
    """A small result: one dataclass."""
    return ENTRIES[0]


def test_tuples_and_dataclasses_are_stored_as_json_like_the_other_wrappers_store_them(vault, alice):
    pad = Scratchpad(vault)
    model = ScriptedModel([("entries_tuple", {}), ("one_entry", {}), "done"])
    agent = Agent(name="a", model=model, tools=offloading(pad, [entries_tuple, one_entry]))
    asyncio.run(Runner.run(agent, "go", context=TurnContext(alice, "t1")))
    stored = json.loads(model.outputs[0])
    assert set(stored) == OFFLOADED_KEYS and stored["content_kind"] == "json"
    assert vault.get(alice, stored["id"]).content == [asdict(entry) for entry in ENTRIES]
    assert json.loads(model.outputs[1]) == asdict(ENTRIES[0])  # small: shown as its JSON, not its repr
