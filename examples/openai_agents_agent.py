"""scratchvault in an OpenAI Agents SDK agent: two users' runs with the same turn id, offline (a scripted Model).

Each run's context says whose turn it is. The agent's own tool lists files (a large JSON result: stored as json,
the model sees a summary and an id); ``scratchpad_read``, in strict mode (the SDK's default), is offered once the
user has rows in the turn. Alice's model reads her listing, sending null for the fields it does not use as strict
mode makes it; Bob's model tries Alice's id and gets "not found", the answer for any id it may not read.

    python examples/openai_agents_agent.py                  # the OS keyring
    python examples/openai_agents_agent.py --memory-keyring # the trial keyring ("memory"): no keyring needed
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agents import Agent, FunctionTool, Model, ModelResponse, Runner, Usage, function_tool, set_tracing_disabled
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from vault import KeyUnavailable, Principal, Vault
from vault.engine import Scratchpad
from vault.integrations.openai_agents import TurnContext, offloading, scratchpad_read_tool


@function_tool
def list_files(directory: str) -> dict[str, Any]:
    """List the files of a directory (a deterministic stand-in for a real tool)."""
    return {"directory": directory, "files": [{"path": f"{directory}/f{i:04}.csv", "size": i * 37}
                                              for i in range(400)]}


class Scripted(Model):
    """A model that makes the scripted calls in order (each may look at the tool results so far, kept in
    ``seen`` as the JSON it was sent), then answers "done"; it prints what it is offered and what it sees."""

    def __init__(self, user: str, calls: list[Any]) -> None:
        self.user, self.calls, self.seen = user, calls, []

    async def get_response(self, system_instructions: Any, input: Any, model_settings: Any, tools: list[Any],
                           *args: Any, **kwargs: Any) -> ModelResponse:
        outputs = [item["output"] for item in input if isinstance(item, dict)
                   and item.get("type") == "function_call_output"]
        if len(outputs) > len(self.seen):
            self.seen.append(json.loads(outputs[-1]))
            print(f"[{self.user}] model sees: {outputs[-1][:150]}")
        print(f"[{self.user}] tools offered: {sorted(t.name for t in tools if isinstance(t, FunctionTool))}")
        if not self.calls:
            text = ResponseOutputText(type="output_text", text="done", annotations=[])
            return ModelResponse(output=[ResponseOutputMessage(id="m", type="message", role="assistant",
                                                               status="completed", content=[text])],
                                 usage=Usage(), response_id=None)
        name, arguments = self.calls.pop(0)
        arguments = arguments(self.seen) if callable(arguments) else arguments
        print(f"[{self.user}] model calls {name} {json.dumps(arguments)}")
        call = ResponseFunctionToolCall(type="function_call", call_id=f"call-{len(self.seen)}", name=name,
                                        arguments=json.dumps(arguments), status="completed")
        return ModelResponse(output=[call], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("this example does not stream")


def run(pad: Scratchpad, model: Scripted, principal: Principal, prompt: str) -> None:
    """One run of the agent for ``principal`` in turn-1: its tool offloaded, scratchpad_read offered when due."""
    agent = Agent(name="files", model=model, tools=[*offloading(pad, [list_files]), scratchpad_read_tool(pad)])
    asyncio.run(Runner.run(agent, prompt, context=TurnContext(principal, "turn-1")))


def story(pad: Scratchpad) -> bool:
    """Alice stores and reads; Bob, in a turn with the same id, tries her id. True when isolation held."""
    alice = Scripted("alice", [("list_files", {"directory": "/srv/a"}), ("scratchpad_read", lambda seen: {
        "id": seen[0]["id"], "mode": "head", "n": 60, "start": None, "end": None})])  # strict: every field
    run(pad, alice, Principal("alice"), "list /srv/a")
    alice_id = alice.seen[0]["id"]  # say it leaks into Bob's chat
    bob = Scripted("bob", [("list_files", {"directory": "/srv/b"}), ("scratchpad_read", {
        "id": alice_id, "mode": "head", "n": None, "start": None, "end": None})])
    run(pad, bob, Principal("bob"), "read it")
    denied = bob.seen[-1].get("error", "").startswith("not found")
    if denied:
        print("-> bob's model used alice's id and got not found, the answer for any id it may not read")
    return "content" in alice.seen[-1] and denied


def main(argv: list[str] | None = None) -> int:
    """Run the story; exit 0 when isolation held, 1 otherwise, 2 without a usable keyring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memory-keyring", action="store_true", help="the trial keyring (keys die with the process)")
    options = parser.parse_args(argv)
    set_tracing_disabled(True)  # offline: nothing is sent anywhere
    with tempfile.TemporaryDirectory(prefix="scratchvault-openai-agents-") as scratch:
        try:
            vault = Vault.open(Path(scratch) / "scratchpad.db",
                               keyring_backend="memory" if options.memory_keyring else None)
        except KeyUnavailable as error:
            print(f"no usable OS keyring: {error}\n(try --memory-keyring)", file=sys.stderr)
            return 2
        with vault:
            isolated = story(Scratchpad(vault, threshold_bytes=4096))
            for user in ("alice", "bob"):
                vault.shred_owner(user)
    return 0 if isolated else 1


if __name__ == "__main__":
    sys.exit(main())
