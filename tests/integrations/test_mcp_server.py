"""``scratchvault mcp`` (vault/ops/mcp_command.py over vault/integrations/mcp.py), run as the subprocess an MCP
host launches: the MCP SDK's own client over stdio, and raw protocol lines. Both processes share a file keyring
(tests/support/file_keyring.py, chosen through PYTHON_KEYRING_BACKEND); this process is the engine, which stored
alice's and bob's observations through ``Scratchpad.observe``. Then, in process, the principal's flags and
variables, and the message without the ``mcp`` extra. The server in process and over HTTP: test_mcp_hosting.py.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.support.file_keyring import FileKeyring
from tests.support.repository import ROOT, child_env
from vault import InvalidArgument, Principal, Vault, tool_declaration
from vault.engine import NOT_FOUND, Scratchpad
from vault.ops import cli, mcp_command

TURN = "turn-7"
ALICE, BOB = Principal("alice", actor="planner"), Principal("bob", actor="planner")
TEXT = "CANARY-alice-page " * 600
CANARIES = ("CANARY", "Traceback")
NAMING = ("user", "user_id", "principal", "owner", "turn", "turn_id", "actor")


class Engine:
    """The engine's side: a vault on the shared keyring file, with alice's and bob's rows of one turn."""

    def __init__(self, root: Path, db: Path) -> None:
        self.db, self.keyring = db, root / "keyring.json"
        self.vault = Vault.open(db, keyring_backend=FileKeyring(self.keyring))
        self.pad = Scratchpad(self.vault)
        self.alice = self.pad.observe(ALICE, TURN, 1, "web.fetch", TEXT)["id"]
        self.alice_json = self.pad.observe(ALICE, TURN, 2, "sql", {"rows": [[n, "CANARY"] for n in range(900)]})["id"]
        self.bob = self.pad.observe(BOB, TURN, 1, "web.fetch", "CANARY-bob " * 900)["id"]
        self.alice_other_turn = self.pad.observe(ALICE, "turn-8", 1, "web.fetch", TEXT)["id"]

    def env(self, **extra: str) -> dict[str, str]:
        return {"PYTHONPATH": str(ROOT), "PYTHON_KEYRING_BACKEND": "tests.support.file_keyring.FileKeyring",
                "SCRATCHVAULT_TEST_KEYRING": str(self.keyring), **extra}

    def command(self, *flags: str) -> list[str]:
        return [sys.executable, "-m", "vault", "mcp", "--db", str(self.db), *flags]


@pytest.fixture
def engine(tmp_path: Path, db_path: Path):
    made = Engine(tmp_path, db_path)
    yield made
    made.vault.close()


def test_the_sdk_client_over_stdio_reads_alices_rows_of_her_turn_and_nothing_else(engine, tmp_path):
    # the flag wins over its variable: the host's environment says bob, its command line alice
    command = engine.command("--user", "alice", "--actor", "planner")
    params = StdioServerParameters(command=command[0], args=command[1:], cwd=str(ROOT),
                                   env=engine.env(SCRATCHVAULT_USER="bob", SCRATCHVAULT_TURN=TURN))
    stderr_path = tmp_path / "server.stderr"

    async def session() -> None:
        with stderr_path.open("w") as stderr:
            async with Client(stdio_client(params, errlog=stderr)) as client:
                listed = (await client.list_tools()).tools
                assert [tool.name for tool in listed] == ["scratchpad_read"]
                assert listed[0].input_schema == tool_declaration("mcp")["inputSchema"]
                calls = [{"id": engine.alice, "mode": "head", "n": 18}, {"id": engine.alice, "mode": "tail", "n": 7},
                         {"id": engine.alice, "mode": "range", "start": 18, "end": 40},
                         {"id": engine.alice_json, "mode": "range", "start": 0, "end": 30},
                         {"id": engine.bob}, {"id": engine.alice_other_turn}, {"id": "f" * 32},
                         *({"id": engine.bob, name: "bob"} for name in NAMING), {"mode": "head"}]
                for arguments in calls:
                    answer = await client.call_tool("scratchpad_read", arguments)
                    expected = engine.pad.call_tool(ALICE, TURN, arguments)  # the engine's own answer
                    assert answer.structured_content == expected
                    assert [json.loads(block.text) for block in answer.content] == [expected]
                    assert answer.is_error is ("error" in expected)

    anyio.run(session)
    head = engine.pad.call_tool(ALICE, TURN, {"id": engine.alice, "n": 18})
    assert head["content"] == TEXT[:18] and engine.pad.call_tool(ALICE, TURN, {"id": engine.bob}) == NOT_FOUND
    refused = engine.pad.call_tool(ALICE, TURN, {"id": engine.bob, "turn_id": TURN})
    assert refused["error"].startswith("invalid arguments: unknown argument(s): 'turn_id'")
    assert not any(canary in stderr_path.read_text() for canary in CANARIES)


class RawServer:
    """The server as a subprocess spoken to line by line (JSON-RPC over stdio), with a bounded wait per reply."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, cwd=ROOT, env=child_env(**env))
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.put(line)

    def send(self, message: object) -> None:
        self.process.stdin.write((message if isinstance(message, str) else json.dumps(message)).encode() + b"\n")
        self.process.stdin.flush()

    def reply(self) -> dict:
        return json.loads(self.lines.get(timeout=30))  # every stdout line is one JSON-RPC message

    def call(self, request_id: int, params: object) -> dict:
        self.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})
        answer = self.reply()
        assert answer["id"] == request_id
        return answer


def test_garbage_is_answered_stdout_is_protocol_only_and_closing_stdin_ends_the_server(engine):
    server = RawServer(engine.command("--user", "alice", "--turn", TURN), engine.env())
    server.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
    assert server.reply()["result"]["capabilities"]["tools"] == {"listChanged": False}
    server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    server.send("this is not JSON {")  # not a JSON-RPC message: the SDK drops it (no reply) and serves on
    server.send('{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": [1, 2]}')  # likewise
    for request_id, arguments in enumerate([[engine.alice], "CANARY", 7, False, "[1]"], start=3):
        answer = server.call(request_id, {"name": "scratchpad_read", "arguments": arguments})["result"]
        assert answer["structuredContent"] == engine.pad.call_tool(ALICE, TURN, arguments)  # not an object: its answer
        assert answer["isError"] is True and not any(canary in json.dumps(answer) for canary in CANARIES), answer
    for request_id, params in enumerate([{"name": "scratchpad_read"}, {"name": "no_such_tool", "arguments": {}}],
                                        start=8):
        answer = server.call(request_id, params)
        refusal = answer.get("error") or answer["result"]["structuredContent"]
        assert not any(canary in json.dumps(refusal) for canary in CANARIES), refusal
    assert server.call(9, {"name": "scratchpad_read", "arguments": None})["result"]["isError"] is True
    read = server.call(10, {"name": "scratchpad_read", "arguments": {"id": engine.alice, "n": 6}})["result"]
    assert read["structuredContent"]["content"] == TEXT[:6] and read["isError"] is False  # still serving
    server.process.stdin.close()
    assert server.process.wait(timeout=20) == 0
    stderr = server.process.stderr.read().decode()
    assert not any(canary in stderr for canary in CANARIES), stderr
    assert server.lines.empty()  # nothing but the replies above was written to stdout


# -- the command: the principal it is bound to, and the extra it needs ---------------------------------
def test_the_principal_comes_from_the_flags_else_the_environment(monkeypatch):
    parse = cli.build_parser().parse_args
    monkeypatch.setenv("SCRATCHVAULT_USER", "bob")
    monkeypatch.setenv("SCRATCHVAULT_TURN", "turn-env")
    monkeypatch.setenv("SCRATCHVAULT_CHANNEL", "web")
    assert mcp_command.bound_principal(parse(["mcp"])) == (Principal("bob", channel="web"), "turn-env")
    flagged = parse(["mcp", "--user", "alice", "--actor", "planner", "--turn", "turn-1"])
    assert mcp_command.bound_principal(flagged) == (Principal("alice", actor="planner", channel="web"), "turn-1")
    monkeypatch.delenv("SCRATCHVAULT_TURN")
    with pytest.raises(InvalidArgument, match=r"--turn \(or \$SCRATCHVAULT_TURN\)"):
        mcp_command.bound_principal(parse(["mcp", "--user", "alice"]))


def test_without_the_extra_the_command_says_what_to_install_and_the_cli_never_imports_mcp(monkeypatch, capsys):
    for name in [name for name in sys.modules if name.split(".")[0] == "mcp"] + ["mcp"]:
        monkeypatch.setitem(sys.modules, name, None)  # as if scratchvault[mcp] were not installed
    monkeypatch.delitem(sys.modules, "vault.integrations.mcp", raising=False)
    assert cli.main(["mcp", "--db", str(ROOT / "absent.db"), "--user", "alice", "--turn", "turn-1"]) == 5
    assert capsys.readouterr().err == ("scratchvault: VaultError: the MCP server needs the MCP SDK: install "
                                       "scratchvault with its mcp extra (pip install '<clone or wheel>[mcp]')\n")
    probe = "import sys, vault.ops.cli; sys.exit(any(m.split('.')[0] == 'mcp' for m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=child_env(), timeout=60).returncode == 0


# -- the example: the engine stores, the host launches the server per user -----------------------------
def assert_example(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[alice's server] tools listed: ['scratchpad_read']" in result.stdout
    assert '-> {"id": "' in result.stdout and "unknown argument(s): 'user'" in result.stdout
    assert "bob's server was given alice's id and answered not found" in result.stdout


def test_the_example_runs_two_users_apart_with_the_memory_keyring():
    command = [sys.executable, "examples/mcp_client.py", "--memory-keyring"]
    assert_example(subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False))


@pytest.mark.real_keyring
def test_the_example_runs_two_users_apart_on_the_os_keyring(real_keyring):
    command = [sys.executable, "examples/mcp_client.py"]
    assert_example(subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False))
