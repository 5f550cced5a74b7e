"""A tiny deterministic agent loop on scratchvault: two users' turns side by side, then one turn resumed.

No network and no real model: each user's "model" is a script of tool calls. The runtime (this file) runs the
tools, lets the Scratchpad decide what the model sees, offers ``scratchpad_read`` only when it may be used,
and passes the model's tool calls on with the principal *it* knows. User B's model tries an id that belongs to
user A and gets "not found". Finally user A's turn is suspended, resumed in a new Vault on the same file, its
rows' lifetime extended, and the tool is still offered when it would otherwise have expired.

    python examples/agent_loop.py                  # the OS keyring (e.g. through: bash scripts/run ...)
    python examples/agent_loop.py --memory-keyring # the trial keyring ("memory"): no keyring needed
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vault import KeyUnavailable, Principal, Vault
from vault.engine import Scratchpad

T0 = 1_800_000_000.0
PAGE = "\n".join(f"<p>Paragraph {i}: quarterly figures for region {i % 7}.</p>" for i in range(300))
LISTING = {"results": [{"path": f"/srv/data/file{i:04}.csv", "size": i * 37} for i in range(400)], "truncated": False}
EXECUTORS = {  # deterministic stand-ins for real tools
    "web.fetch": lambda args: PAGE,
    "calc": lambda args: {"sum": sum(args["numbers"])},
    "fs.list": lambda args: LISTING,
    "count": lambda args: {"count": len(args["items"])},
}


class ScriptedClock:
    """The vault's clock, moved by the script: expiry without waiting."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


class Turn:
    """One user's turn: its principal, step results (as the model saw them) and the model's script."""

    def __init__(self, user: str, turn_id: str, script: list[Any]) -> None:
        self.principal, self.turn_id, self.script = Principal(user), turn_id, list(script)
        self.steps: dict[int, Any] = {}

    def say(self, text: str) -> None:
        print(f"[{self.principal.user_id}] {text}")


def shown(value: Any) -> str:
    """Compact JSON of what the model sees, long strings shortened for this printout only."""
    def short(item: Any) -> Any:
        if isinstance(item, str) and len(item) > 90:
            return f"{item[:60]}…({len(item):,} chars)"
        if isinstance(item, dict):
            return {k: short(v) for k, v in item.items()}
        return [short(v) for v in item] if isinstance(item, list) else item
    return json.dumps(short(value), ensure_ascii=False)


def step(pad: Scratchpad, turn: Turn, notes: dict[str, str]) -> Any:
    """One model call: offer tools, take the model's next scripted action, run it, show the result."""
    offered = [tool["name"] for tool in pad.tools(turn.principal, turn.turn_id)]
    name, args = turn.script.pop(0)
    args = args(notes) if callable(args) else args
    turn.say(f"tools offered: {offered}; model calls {name} {shown(args)}")
    if name == "scratchpad_read":
        result = pad.call_tool(turn.principal, turn.turn_id, args) if name in offered else {"error": "no such tool"}
    else:
        resolved = {k: pad.resolve(turn.principal, turn.turn_id, turn.steps, v) if str(v).startswith("${") else v
                    for k, v in args.items()}  # ${stepN.field}: the runtime resolves full values, not the model
        number = len(turn.steps) + 1
        result = pad.observe(turn.principal, turn.turn_id, number, name, EXECUTORS[name](resolved))
        turn.steps[number] = result
    turn.say(f"model sees: {shown(result)}")
    return result


def side_by_side(pad: Scratchpad, alice: Turn, bob: Turn) -> bool:
    """Both turns, one model call each in turn; True when Bob's try with Alice's id came back as not found."""
    notes: dict[str, str] = {}
    results = []
    while alice.script or bob.script:
        for turn in (alice, bob):
            if turn.script:
                results.append((turn, step(pad, turn, notes)))
                if turn is alice and isinstance(results[-1][1], dict) and "ref_hint" in results[-1][1]:
                    notes["alice_id"] = results[-1][1]["id"]  # say it leaks into Bob's chat
    denied = [r for t, r in results if t is bob and r.get("error", "").startswith("not found")]
    if denied:
        print("-> bob's model used alice's id and got not found, the answer for any id it may not read")
    return bool(denied)


def resume(path: Path, keyring: Any, clock: ScriptedClock, alice: Turn, bob: Turn) -> bool:
    """Alice's turn resumed in a new Vault on the same file; True when the tool survives past the old expiry."""
    print("\n== alice's turn is suspended; 50 minutes later a new Vault on the same file resumes it ==")
    clock.now += 50 * 60
    with Vault.open(path, keyring_backend=keyring, clock=clock) as vault:
        pad = Scratchpad(vault)
        found = vault.list_for_turn(alice.principal, alice.turn_id)
        offered = [t["name"] for t in pad.tools(alice.principal, alice.turn_id)]
        alice.say(f"resumed: found {len(found)} stored row(s) of {alice.turn_id}; tools offered: {offered}")
        extended = vault.extend_turn(alice.principal, alice.turn_id, ttl_seconds=3600)
        alice.say(f"extend_turn(ttl_seconds=3600) extended {extended} row(s)")
        clock.now += 20 * 60
        print("20 minutes later: past the rows' original one-hour lifetime")
        bob.say(f"(not resumed) tools offered: {[t['name'] for t in pad.tools(bob.principal, bob.turn_id)]}")
        print(f"clean-up at the start of the next model call: gc removed {vault.gc()} expired row(s)")
        alice.script = [("scratchpad_read", {"id": found[0].id, "mode": "tail", "n": 60})]
        result = step(pad, alice, {})
        print(f"counters of the resumed process: {pad.stats()}")
        shredded = sum(vault.shred_owner(turn.principal.user_id) for turn in (alice, bob))
        print(f"clean-up: shred_owner removed {shredded} row(s) and both users' keys from the keyring")
        return bool(found) and extended == len(found) and "content" in result


def main(argv: list[str] | None = None) -> int:
    """Run the story; exit 0 when isolation and resume behaved, 1 otherwise, 2 without a usable keyring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memory-keyring", action="store_true", help="the trial keyring (keys die with the process)")
    options = parser.parse_args(argv)
    keyring = "memory" if options.memory_keyring else None
    clock = ScriptedClock()
    alice = Turn("alice", "turn-a1", [
        ("web.fetch", {"url": "https://example.org/report"}),
        ("scratchpad_read", lambda notes: {"id": notes["alice_id"], "mode": "head", "n": 80}),
        ("calc", {"numbers": [1, 2, 3]}),
    ])
    bob = Turn("bob", "turn-b1", [
        ("calc", {"numbers": [40, 2]}),
        ("fs.list", {"path": "/srv/data"}),
        ("count", {"items": "${step2.results}"}),
        ("scratchpad_read", lambda notes: {"id": notes["alice_id"], "mode": "full"}),
    ])
    with tempfile.TemporaryDirectory(prefix="scratchvault-agent-") as scratch:
        path = Path(scratch) / "scratchpad.db"
        try:
            vault = Vault.open(path, keyring_backend=keyring, clock=clock)
        except KeyUnavailable as error:
            print(f"no usable OS keyring: {error}\n(try --memory-keyring)", file=sys.stderr)
            return 2
        with vault:
            print(f"vault at {path} (keyring backend: {vault.stats()['keyring_backend']})")
            pad = Scratchpad(vault, threshold_bytes=4096)
            print("\n== two users' turns, side by side ==")
            isolated = side_by_side(pad, alice, bob)
            print(f"counters: {pad.stats()}")
        resumed = resume(path, keyring, clock, alice, bob)
    return 0 if isolated and resumed else 1


if __name__ == "__main__":
    sys.exit(main())
