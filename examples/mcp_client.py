"""``scratchvault mcp`` driven by the MCP SDK's own client, offline: the server a host launches per user and turn.

This process plays the engine: it stores Alice's and Bob's large results of turn-1 through
``Scratchpad.observe``. Then, as an MCP host would, it launches ``python -m vault mcp`` over stdio, once for
Alice and once for Bob (``--user``/``--turn``: the host fixes whose rows the server reads, never the model), on
the same database and keyring. Alice's server lists ``scratchpad_read`` and reads her listing; an argument naming
another user is refused; Bob's server, given Alice's id, answers "not found", as for any id it may not read.

    python examples/mcp_client.py                  # the OS keyring, which the server process shares
    python examples/mcp_client.py --memory-keyring # the trial keyring ("memory"): no keyring needed

An in-memory keyring lives in one process, so with ``--memory-keyring`` each server runs in this process
(``build_server``, the server ``scratchvault mcp`` runs) and the client reaches it through the SDK's in-memory
transport instead of a subprocess.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from vault import KeyUnavailable, Principal, Vault
from vault.engine import Scratchpad
from vault.integrations.mcp import build_server, fixed_principal

ROOT = Path(__file__).resolve().parent.parent


def listing(directory: str) -> dict[str, Any]:
    """A large tool result (a deterministic stand-in for a real tool's)."""
    return {"directory": directory, "files": [{"path": f"{directory}/f{i:04}.csv", "size": i * 37}
                                              for i in range(400)]}


class Host:
    """How the host reaches each user's server: ``python -m vault mcp`` launched over stdio on the engine's
    database and keyring, or (``pad`` given: an in-memory keyring) the same server in this process."""

    def __init__(self, db: Path, pad: Scratchpad | None) -> None:
        self.db, self.pad = db, pad

    def server(self, user: str) -> Any:
        if self.pad is not None:
            return build_server(self.pad, fixed_principal(Principal(user), "turn-1"))
        command = StdioServerParameters(command=sys.executable, args=["-m", "vault", "mcp", "--db", str(self.db),
                                                                      "--user", user, "--turn", "turn-1"],
                                        cwd=str(ROOT), env={**os.environ, "PYTHONPATH": str(ROOT)})
        return stdio_client(command, errlog=sys.stderr)


async def host(where: Host, user: str, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Start the server for ``user`` in turn-1, as a host would, and make the model's calls through it."""
    answers = []
    async with Client(where.server(user)) as client:
        print(f"[{user}'s server] tools listed: {[tool.name for tool in (await client.list_tools()).tools]}")
        for arguments in calls:
            answer = (await client.call_tool("scratchpad_read", arguments)).structured_content
            print(f"[{user}'s server] scratchpad_read {json.dumps(arguments)} -> {json.dumps(answer)[:120]}")
            answers.append(answer)
    return answers


def story(pad: Scratchpad, where: Host) -> bool:
    """The engine stores; each user's server reads. True when Alice read hers and Bob could not read it."""
    alices = pad.observe(Principal("alice"), "turn-1", 1, "list_files", listing("/srv/a"))["id"]
    pad.observe(Principal("bob"), "turn-1", 1, "list_files", listing("/srv/b"))
    print(f"[engine] stored alice's and bob's listings of turn-1; alice's id is {alices}")
    read, named = anyio.run(host, where, "alice", [{"id": alices, "mode": "head", "n": 60},
                                                   {"id": alices, "user": "bob"}])
    [denied] = anyio.run(host, where, "bob", [{"id": alices}])  # say alice's id leaked into bob's chat
    if denied.get("error", "").startswith("not found"):
        print("-> bob's server was given alice's id and answered not found, as for any id it may not read")
    return "content" in read and "unknown argument" in named.get("error", "") and "content" not in denied


def main(argv: list[str] | None = None) -> int:
    """Run the story; exit 0 when isolation held, 1 otherwise, 2 without a usable keyring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memory-keyring", action="store_true",
                        help="the trial keyring (keys die with the process), the servers in this process")
    options = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="scratchvault-mcp-") as scratch:
        db = Path(scratch) / "scratchpad.db"
        try:
            vault = Vault.open(db, keyring_backend="memory" if options.memory_keyring else None)
        except KeyUnavailable as error:
            print(f"no usable OS keyring: {error}\n(try --memory-keyring)", file=sys.stderr)
            return 2
        with vault:
            pad = Scratchpad(vault, threshold_bytes=4096)
            isolated = story(pad, Host(db, pad if options.memory_keyring else None))
            for user in ("alice", "bob"):
                vault.shred_owner(user)
    return 0 if isolated else 1


if __name__ == "__main__":
    sys.exit(main())
