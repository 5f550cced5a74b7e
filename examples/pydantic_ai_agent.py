"""scratchvault in a pydantic-ai agent: two users' runs with the same turn id, offline (scripted FunctionModels).

Each run's deps say whose turn it is. The agent's own tool lists files (a large JSON result: stored, the model
sees a summary and an id); ``scratchpad_read`` is offered once the user has rows in the turn. Alice's model reads
her listing; Bob's model tries Alice's id and gets "not found", the answer for any id it may not read.

    python examples/pydantic_ai_agent.py                  # the OS keyring
    python examples/pydantic_ai_agent.py --memory-keyring # the trial keyring ("memory"): no keyring needed
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from vault import KeyUnavailable, Principal, Vault
from vault.engine import Scratchpad
from vault.integrations.pydantic_ai import OffloadingToolset, ScratchpadToolset


@dataclass
class Deps:
    """Whose turn a run is: set by the application, never by the model."""

    principal: Principal
    turn_id: str


def list_files(directory: str) -> dict[str, Any]:
    """List the files of a directory (a deterministic stand-in for a real tool)."""
    return {"directory": directory, "files": [{"path": f"{directory}/f{i:04}.csv", "size": i * 37}
                                              for i in range(400)]}


def scripted(user: str, calls: list[Any], results: list[Any]) -> FunctionModel:
    """A model that makes the scripted calls in order (each may look at the tool results so far, which it
    collects in ``results`` as it received them: JSON), then stops."""

    def model(messages: list[Any], info: Any) -> ModelResponse:
        results.extend(json.loads(p.model_response_str()) for p in messages[-1].parts if isinstance(p, ToolReturnPart))
        if results:
            print(f"[{user}] model sees: {json.dumps(results[-1])[:150]}")
        print(f"[{user}] tools offered: {sorted(tool.name for tool in info.function_tools)}")
        if not calls:
            return ModelResponse(parts=[TextPart("done")])
        name, args = calls.pop(0)
        args = args(results) if callable(args) else args
        print(f"[{user}] model calls {name} {json.dumps(args)}")
        return ModelResponse(parts=[ToolCallPart(name, args)])
    return FunctionModel(model)


def story(pad: Scratchpad) -> bool:
    """Alice stores and reads; Bob, in a turn with the same id, tries her id. True when isolation held."""
    toolsets = [ScratchpadToolset(pad), OffloadingToolset(FunctionToolset([list_files]), pad=pad)]
    seen_by_alice: list[Any] = []
    alice = scripted("alice", [("list_files", {"directory": "/srv/a"}),
                               ("scratchpad_read", lambda seen: {"id": seen[0]["id"], "mode": "head", "n": 60})],
                     seen_by_alice)
    Agent(alice, deps_type=Deps, toolsets=toolsets).run_sync("list /srv/a", deps=Deps(Principal("alice"), "turn-1"))
    alice_id = seen_by_alice[0]["id"]  # say it leaks into Bob's chat
    seen_by_bob: list[Any] = []
    bob = scripted("bob", [("list_files", {"directory": "/srv/b"}), ("scratchpad_read", {"id": alice_id})],
                   seen_by_bob)
    Agent(bob, deps_type=Deps, toolsets=toolsets).run_sync("read it", deps=Deps(Principal("bob"), "turn-1"))
    read = "content" in seen_by_alice[-1]
    denied = seen_by_bob[-1].get("error", "").startswith("not found")
    if denied:
        print("-> bob's model used alice's id and got not found, the answer for any id it may not read")
    return read and denied


def main(argv: list[str] | None = None) -> int:
    """Run the story; exit 0 when isolation held, 1 otherwise, 2 without a usable keyring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memory-keyring", action="store_true", help="the trial keyring (keys die with the process)")
    options = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="scratchvault-pydantic-ai-") as scratch:
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
