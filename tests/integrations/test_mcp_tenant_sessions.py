"""The README's multi-tenant MCP server over HTTP: a session opened with one tenant's token does not accept another
tenant's token. The SDK binds a session to the token's client_id, issuer and subject and routes answers by JSON-RPC
id within a session, so a verifier giving every tenant the same triple would let bob, knowing alice's session id,
join her session and receive her answer."""

from __future__ import annotations

import threading
from contextlib import AsyncExitStack

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.readme import readme_block
from vault import Principal, TrialKeyringWarning
from vault.engine import Scratchpad

BASE = "http://127.0.0.1:8000"
VERSION = "2025-06-18"
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
ALICE, BOB = "token-of-alice-turn-1", "token-of-bob-turn-1"


def readme_server(metrics=None) -> dict:
    """The README's server, as written (bob granted too; a metrics hook on its pad, to hold a read in flight)."""
    code = readme_block("### MCP").replace("Scratchpad(vault)", "Scratchpad(vault, metrics=metrics)")
    namespace = {"__name__": "readme", "metrics": metrics}
    with pytest.warns(TrialKeyringWarning):
        exec(compile(code, "README-mcp", "exec"), namespace)
    namespace["grants"][BOB] = (Principal("bob"), "turn-1")
    return namespace


async def post(http: httpx2.AsyncClient, token: str, session: str | None, body: dict) -> httpx2.Response:
    headers = {**ACCEPT, "Authorization": f"Bearer {token}", "Mcp-Protocol-Version": VERSION}
    return await http.post("/mcp", json=body, headers={**headers, "Mcp-Session-Id": session} if session else headers)


async def open_session(http: httpx2.AsyncClient, token: str) -> str:
    session = (await post(http, token, None, INIT)).headers["mcp-session-id"]
    await post(http, token, session, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    return session


def test_another_tenants_token_cannot_use_a_session_it_did_not_open():
    namespace = readme_server()
    statuses = []

    async def main() -> None:
        async with namespace["server"].session_manager.run(), httpx2.AsyncClient(
                transport=httpx2.ASGITransport(app=namespace["app"]), base_url=BASE) as http:
            session = await open_session(http, ALICE)
            for token in (ALICE, BOB):
                listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
                statuses.append((await post(http, token, session, listing)).status_code)

    try:
        anyio.run(main)
    finally:
        namespace["vault"].close()
    assert statuses == [200, 404]  # alice's own session; bob is told it does not exist


def test_a_tenant_on_anothers_session_never_receives_the_others_answer():
    """alice's read is held (by the pad's metrics hook) once read; bob sends a read of his own with the same
    JSON-RPC id on alice's session and is held too; then alice's answer is let go, then bob's."""
    gates = [(threading.Event(), threading.Event()) for _ in range(2)]  # (arrived, let go) for each read
    reads = iter(gates)

    def metrics(name: str, _increment: int) -> None:
        if name == "tool_reads":
            arrived, let_go = next(reads, (threading.Event(), threading.Event()))
            arrived.set()
            let_go.wait(5)

    namespace = readme_server(metrics)
    vault, bodies = namespace["vault"], {}
    rows = {token: Scratchpad(vault).observe(Principal(user), "turn-1", 1, "web", f"CANARY-{user} " * 900)["id"]
            for token, user in ((ALICE, "alice"), (BOB, "bob"))}

    async def read(http, token, session) -> None:
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": "scratchpad_read", "arguments": {"id": rows[token], "n": 40}}}
        with anyio.move_on_after(5):
            bodies[token] = (await post(http, token, session, call)).text

    async def main() -> None:
        async with namespace["server"].session_manager.run(), httpx2.AsyncClient(
                transport=httpx2.ASGITransport(app=namespace["app"]), base_url=BASE, timeout=10) as http:
            session = await open_session(http, ALICE)
            async with anyio.create_task_group() as group:
                group.start_soon(read, http, ALICE, session)
                await anyio.to_thread.run_sync(gates[0][0].wait, 5)
                group.start_soon(read, http, BOB, session)
                with anyio.move_on_after(2):  # bob's read arrives, unless he was refused
                    while not gates[1][0].is_set() and BOB not in bodies:
                        await anyio.sleep(0.01)
                gates[0][1].set()
                await anyio.sleep(0.3)
                gates[1][1].set()

    try:
        anyio.run(main)
    finally:
        vault.close()
    assert "CANARY-alice" not in bodies.get(BOB, "")
    assert "CANARY-alice" in bodies[ALICE]  # and alice's answer reached alice


def test_two_tenants_racing_on_one_server_each_read_only_their_own():
    """Sound (no change needed): concurrent calls of two tenants, each in its own session through the SDK's client,
    are each served with their own principal (the hook sees each request's own HTTP request)."""
    namespace = readme_server()
    vault = namespace["vault"]
    rows = {token: Scratchpad(vault).observe(Principal(user), "turn-1", 1, "web", f"{user.upper()}-" * 3000)["id"]
            for token, user in ((ALICE, "alice"), (BOB, "bob"))}
    seen: dict[str, set[str]] = {ALICE: set(), BOB: set()}

    async def tenant(token: str) -> None:
        async with AsyncExitStack() as stack:
            http = await stack.enter_async_context(httpx2.AsyncClient(
                transport=httpx2.ASGITransport(app=namespace["app"]), base_url=BASE,
                headers={"Authorization": f"Bearer {token}"}))
            client = await stack.enter_async_context(Client(streamable_http_client(f"{BASE}/mcp", http_client=http)))
            async with anyio.create_task_group() as group:
                for row in list(rows.values()) * 10:
                    group.start_soon(read, client, token, row)

    async def read(client, token: str, row: str) -> None:
        answer = (await client.call_tool("scratchpad_read", {"id": row, "n": 6})).structured_content
        seen[token].add(answer.get("content") or answer["error"][:9])

    async def main() -> None:
        async with namespace["server"].session_manager.run(), anyio.create_task_group() as group:
            group.start_soon(tenant, ALICE)
            group.start_soon(tenant, BOB)

    try:
        anyio.run(main)
    finally:
        vault.close()
    assert seen == {ALICE: {"ALICE-", "not found"}, BOB: {"BOB-BO", "not found"}}
