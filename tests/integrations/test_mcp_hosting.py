"""The MCP server in process (vault/integrations/mcp.py) through the SDK's own client: when the tool is listed,
vault faults, the principal hook refusing, the README's multi-tenant HTTP server with two tokens (the SDK's
streamable-HTTP client over an in-process ASGI transport). The ``scratchvault mcp`` command, over stdio as a
host launches it: test_mcp_server.py.
"""

from __future__ import annotations

import json
import logging
from contextlib import AsyncExitStack

import anyio
import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from tests.support.readme import readme_block
from vault import InvalidArgument, Principal, TrialKeyringWarning
from vault.engine import FAULT, NOT_FOUND, Scratchpad
from vault.integrations.mcp import REFUSED, build_server, fixed_principal

ALICE, BOB = Principal("alice"), Principal("bob")
TEXT = "CANARY-page " * 900
BASE = "http://127.0.0.1:8000"


@pytest.fixture
def pad(vault):
    return Scratchpad(vault)


def run(server, scenario) -> None:
    """``scenario(client)`` against ``server`` through the SDK's in-process client (the modern protocol)."""
    async def main() -> None:
        async with Client(server) as client:
            await scenario(client)

    anyio.run(main)


def test_the_tool_is_listed_only_while_the_principal_has_rows_in_the_turn(pad):
    async def scenario(client: Client) -> None:
        assert (await client.list_tools()).tools == []  # nothing stored for alice in turn-1 yet
        assert (await client.call_tool("scratchpad_read", {"id": "a" * 32})).structured_content == NOT_FOUND
        pad.observe(BOB, "turn-1", 1, "tool", TEXT)
        assert (await client.list_tools()).tools == []  # bob's rows are not alice's
        row = pad.observe(ALICE, "turn-1", 2, "tool", TEXT)["id"]
        assert [tool.name for tool in (await client.list_tools()).tools] == ["scratchpad_read"]  # asked again
        answer = await client.call_tool("scratchpad_read", {"id": row, "mode": "tail", "n": 5})
        assert answer.structured_content["content"] == TEXT[-5:] and answer.is_error is False

    run(build_server(pad, fixed_principal(ALICE, "turn-1")), scenario)


def test_a_vault_fault_lists_nothing_and_answers_the_fault_result_naming_no_content(vault, pad, caplog):
    row = pad.observe(ALICE, "turn-1", 1, "tool", TEXT)["id"]
    vault.close()

    async def scenario(client: Client) -> None:
        assert (await client.list_tools()).tools == []
        answer = await client.call_tool("scratchpad_read", {"id": row})
        assert answer.structured_content == FAULT and answer.is_error is True
        assert [json.loads(block.text) for block in answer.content] == [FAULT]

    with caplog.at_level(logging.WARNING):  # (audit records, at INFO, carry row ids by design)
        run(build_server(pad, fixed_principal(ALICE, "turn-1")), scenario)
    assert "StorageError" in caplog.text and "CANARY" not in caplog.text and row not in caplog.text


@pytest.mark.parametrize("hook", ["raises", "returns a string", "returns a bad principal", "async, raising"])
def test_a_hook_that_names_no_principal_refuses_the_request_with_one_message(pad, hook):
    async def failing(_context):
        raise KeyError("CANARY-token")

    principal_for = {"raises": lambda _context: {}["CANARY-token"], "returns a string": lambda _context: "alice",
                     "returns a bad principal": lambda _context: ("alice", "turn-1"), "async, raising": failing}[hook]

    async def scenario(client: Client) -> None:
        for call in (client.list_tools(), client.call_tool("scratchpad_read", {"id": "a" * 32})):
            with pytest.raises(MCPError) as refused:
                await call
            assert refused.value.message == REFUSED and "CANARY" not in str(refused.value.error)

    run(build_server(pad, principal_for), scenario)


def test_an_async_hook_names_the_principal_and_a_principal_cannot_be_bound_wrongly(pad):
    row = pad.observe(ALICE, "turn-1", 1, "tool", TEXT)["id"]

    async def alice_of_turn_1(_context):
        return ALICE, "turn-1"

    async def scenario(client: Client) -> None:
        assert (await client.call_tool("scratchpad_read", {"id": row, "n": 3})).structured_content["content"] == "CAN"

    run(build_server(pad, alice_of_turn_1), scenario)
    with pytest.raises(InvalidArgument):
        fixed_principal(ALICE, "")
    with pytest.raises(InvalidArgument):
        build_server(pad, None)


# -- the README's multi-tenant server over HTTP ---------------------------------------------------------
def test_the_readme_http_server_maps_each_token_to_its_principal_and_keeps_them_apart():
    code = readme_block("### MCP")
    assert code.count('keyring_backend="memory"') == 1 and len(code.strip().splitlines()) <= 30
    namespace = {"__name__": "readme"}
    with pytest.warns(TrialKeyringWarning):
        exec(compile(code, "README-mcp", "exec"), namespace)  # as written, with the documented trial keyring
    vault, server, app, grants = (namespace[name] for name in ("vault", "server", "app", "grants"))
    pad = Scratchpad(vault)
    grants["token-of-bob-turn-1"] = (BOB, "turn-1")
    rows = {"alice": pad.observe(ALICE, "turn-1", 1, "web", TEXT)["id"],
            "bob": pad.observe(BOB, "turn-1", 1, "web", "bob's " * 900)["id"]}

    async def session(token: str, stack: AsyncExitStack) -> Client:
        http = await stack.enter_async_context(httpx2.AsyncClient(
            transport=httpx2.ASGITransport(app=app), base_url=BASE, headers={"Authorization": f"Bearer {token}"}))
        return await stack.enter_async_context(Client(streamable_http_client(f"{BASE}/mcp", http_client=http)))

    async def main() -> None:
        async with server.session_manager.run():
            for token, own, other in (("token-of-alice-turn-1", "alice", "bob"),
                                      ("token-of-bob-turn-1", "bob", "alice")):
                async with AsyncExitStack() as stack:
                    client = await session(token, stack)
                    assert [tool.name for tool in (await client.list_tools()).tools] == ["scratchpad_read"]
                    mine = await client.call_tool("scratchpad_read", {"id": rows[own], "n": 5})
                    assert mine.structured_content["content"] == (TEXT if own == "alice" else "bob's ")[:5]
                    theirs = await client.call_tool("scratchpad_read", {"id": rows[other], "user": other})
                    assert "unknown argument(s): 'user'" in theirs.structured_content["error"]
                    theirs = await client.call_tool("scratchpad_read", {"id": rows[other]})
                    assert theirs.structured_content == NOT_FOUND and theirs.is_error is True
            async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=BASE) as http:
                for headers in ({"Authorization": "Bearer token-of-mallory"}, {}):  # never granted; no token
                    answer = await http.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 1,
                                                                            "method": "tools/list"})
                    assert answer.status_code == 401

    try:
        anyio.run(main)
    finally:
        vault.close()
