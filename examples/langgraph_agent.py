"""scratchvault in a LangGraph ReAct graph: two users' runs with the same turn id, offline (a scripted chat model).

The graph's run context says whose turn it is. The graph's own tool lists files (a large JSON result: stored as
json, the model sees a summary and an id); ``scratchpad_read`` is bound once the user has rows in the turn.
Alice's model reads her listing; Bob's model tries Alice's id and gets "not found", the answer for any id it may
not read.

    python examples/langgraph_agent.py                  # the OS keyring
    python examples/langgraph_agent.py --memory-keyring # the trial keyring ("memory"): no keyring needed
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

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.runtime import Runtime
from pydantic import Field

from vault import KeyUnavailable, Principal, Vault
from vault.engine import Scratchpad
from vault.integrations.langchain import offered, offloading, repair_reads, scratchpad_read_tool


@dataclass
class Turn:
    """Whose turn a run is: set by the application, never by the model."""

    principal: Principal
    turn_id: str


@tool
def list_files(directory: str) -> dict[str, Any]:
    """List the files of a directory (a deterministic stand-in for a real tool)."""
    return {"directory": directory, "files": [{"path": f"{directory}/f{i:04}.csv", "size": i * 37}
                                              for i in range(400)]}


class Scripted(BaseChatModel):
    """A chat model that makes the scripted calls in order (each may look at the tool results so far), then stops;
    it prints what it is offered and what it sees."""

    user: str
    calls: list[Any]
    seen: list[Any] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Scripted:
        print(f"[{self.user}] tools offered: {sorted(t.name for t in tools)}")
        return self

    def _generate(self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        if isinstance(messages[-1], ToolMessage):
            self.seen.append(json.loads(messages[-1].content))
            print(f"[{self.user}] model sees: {messages[-1].content[:150]}")
        message = AIMessage("done")
        if self.calls:
            name, args = self.calls.pop(0)
            args = args(self.seen) if callable(args) else args
            print(f"[{self.user}] model calls {name} {json.dumps(args)}")
            message = AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"call-{len(self.seen)}"}])
        return ChatResult(generations=[ChatGeneration(message=message)])


def build(pad: Scratchpad, model: Scripted) -> Any:
    """The ReAct graph: offloading tools, scratchpad_read bound per model call, a ToolNode running them."""
    tools: list[BaseTool] = [*offloading(pad, [list_files]), scratchpad_read_tool(pad)]

    def agent(state: MessagesState, runtime: Runtime[Turn]) -> dict[str, Any]:
        bound = model.bind_tools(offered(pad, runtime, tools))
        return {"messages": [repair_reads(bound.invoke(state["messages"]))]}
    graph = StateGraph(MessagesState, context_schema=Turn)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile()


def story(pad: Scratchpad) -> bool:
    """Alice stores and reads; Bob, in a turn with the same id, tries her id. True when isolation held."""
    alice = Scripted(user="alice", calls=[("list_files", {"directory": "/srv/a"}), (
        "scratchpad_read", lambda seen: {"id": seen[0]["id"], "mode": "head", "n": 60})])
    build(pad, alice).invoke({"messages": [("user", "list /srv/a")]}, context=Turn(Principal("alice"), "turn-1"))
    alice_id = alice.seen[0]["id"]  # say it leaks into Bob's chat
    bob = Scripted(user="bob", calls=[("list_files", {"directory": "/srv/b"}), ("scratchpad_read", {"id": alice_id})])
    build(pad, bob).invoke({"messages": [("user", "read it")]}, context=Turn(Principal("bob"), "turn-1"))
    denied = bob.seen[-1].get("error", "").startswith("not found")
    if denied:
        print("-> bob's model used alice's id and got not found, the answer for any id it may not read")
    return "content" in alice.seen[-1] and denied


def main(argv: list[str] | None = None) -> int:
    """Run the story; exit 0 when isolation held, 1 otherwise, 2 without a usable keyring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memory-keyring", action="store_true", help="the trial keyring (keys die with the process)")
    options = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="scratchvault-langgraph-") as scratch:
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
