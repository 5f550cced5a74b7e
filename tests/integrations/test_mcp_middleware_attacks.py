"""The MCP server's middleware that hands ``tools/call`` arguments that are not an object to
``call_tool`` (it runs before the SDK validates the params). Attacked over the README's multi-tenant HTTP server
with raw JSON-RPC: whatever the request, the server does nothing but ``call_tool`` for the request's own
principal, or refuses; unauthenticated requests never reach it; no answer shows another tenant's content."""

from __future__ import annotations

import json

import anyio
import httpx2

from tests.integrations.test_mcp_tenant_sessions import ALICE, BASE, BOB, INIT, open_session, post, readme_server
from vault import Principal
from vault.engine import NOT_FOUND, Scratchpad

CALLS = ("tool_reads", "tool_errors", "denied_reads")  # a counter call_tool moves whatever it answers


def answers(response: httpx2.Response) -> list[dict]:
    """The JSON-RPC messages of an HTTP answer (an SSE stream or a JSON body); [] for none."""
    if response.headers.get("content-type", "").startswith("application/json"):
        body = response.json()
        return body if isinstance(body, list) else [body]
    return [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:") and line[5:]]


def call(request_id: object, arguments: object, *, name: str = "scratchpad_read", method: str = "tools/call"):
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {"name": name, "arguments": arguments}}


class Server:
    """The README's server with alice's and bob's rows of turn-1, counting every call_tool it makes."""

    def __init__(self, db_path) -> None:
        self.calls = 0
        self.namespace = readme_server(self._count)
        pad = Scratchpad(self.namespace["vault"])
        self.rows = {who: pad.observe(Principal(who), "turn-1", 1, "web", f"CANARY-{who} " * 900)["id"]
                     for who in ("alice", "bob")}

    def _count(self, name: str, _increment: int) -> None:
        self.calls += name in CALLS

    def run(self, scenario) -> None:
        async def main() -> None:
            async with self.namespace["server"].session_manager.run(), httpx2.AsyncClient(
                    transport=httpx2.ASGITransport(app=self.namespace["app"]), base_url=BASE, timeout=20) as http:
                await scenario(http)
        try:
            anyio.run(main)
        finally:
            self.namespace["vault"].close()


def test_unauthenticated_requests_never_reach_call_tool_whatever_their_arguments(db_path):
    """The SDK's bearer auth is ASGI middleware around the transport; ours runs inside the session's runner."""
    server, statuses = Server(db_path), []

    async def scenario(http: httpx2.AsyncClient) -> None:
        session = await open_session(http, ALICE)
        request = call(2, json.dumps({"id": server.rows["alice"]}))
        for headers in ({}, {"Authorization": "Bearer token-of-mallory"}, {"Authorization": "Basic YTpi"}):
            for sent in (request, [request, request]):
                response = await http.post("/mcp", json=sent, headers={
                    "Accept": "application/json, text/event-stream", "Mcp-Session-Id": session, **headers})
                statuses.append(response.status_code)
                assert "CANARY" not in response.text
    server.run(scenario)
    assert set(statuses) == {401} and server.calls == 0


def test_a_tenants_crafted_requests_get_call_tool_for_that_tenant_or_a_refusal(db_path):
    server = Server(db_path)
    alice_row, big = server.rows["alice"], "x" * 2_000_000
    nested = "[" * 5000 + "]" * 5000
    crafted = [  # (request, whether call_tool answers it)
        (call(2, json.dumps({"id": alice_row})), True),  # a string of JSON naming alice's row: bob's NOT_FOUND
        (call(3, json.dumps({"id": alice_row, "principal": "alice", "user": "alice"})), True),
        (call(4, [alice_row, {"principal": "alice"}]), True), (call(5, alice_row), True), (call(6, big), True),
        (call(7, nested), True), (call(8, 0), True), (call(9, False), True),
        (call(10, "{}", name="Scratchpad_read"), False), (call(11, "[]", name="other"), False),
        (call(12, "{}", method="Tools/call"), False), (call(13, "{}", method="tools/call "), False),
        ({"jsonrpc": "2.0", "id": 14, "method": "tools/call", "params": ["scratchpad_read", alice_row]}, False),
        ({"jsonrpc": "2.0", "id": 15, "method": "tools/call", "params": {"arguments": "{}"}}, False),
        ({"jsonrpc": "2.0", "id": 16, "method": "tools/call", "params": {"name": 7, "arguments": "{}"}}, False)]
    replies: list[list[dict]] = []

    async def scenario(http: httpx2.AsyncClient) -> None:
        session = await open_session(http, BOB)
        for request, answered in crafted:
            before = server.calls
            replies.append(answers(await post(http, BOB, session, request)))
            assert server.calls == before + answered, request["id"]
        for notification in ({k: v for k, v in call(0, alice_row).items() if k != "id"},
                             [call(17, alice_row), call(18, alice_row)]):  # a notification; a batch
            response = await post(http, BOB, session, notification)
            assert response.status_code < 500 and "CANARY" not in response.text
        assert server.calls == before + answered
        last = answers(await post(http, BOB, session, call(19, {"id": server.rows["bob"], "n": 10})))
        assert last[0]["result"]["structuredContent"]["content"] == "CANARY-bob"  # bob's server serves on
    server.run(scenario)
    results = [reply[0].get("result", {}).get("structuredContent") for reply in replies]
    assert results[0] == NOT_FOUND and all(result["error"].startswith("invalid arguments")
                                           for result in results[1:8])
    assert all("error" in reply[0] and "result" not in reply[0] for reply in replies[8:])
    assert not any("CANARY-alice" in json.dumps(reply) for reply in replies)


def test_concurrent_calls_with_and_without_raw_arguments_each_get_their_own_answer(db_path):
    """The raw arguments travel in a context variable: one request's must never reach another's handler running
    at the same time (on one session, and with the same JSON-RPC ids on another)."""
    server = Server(db_path)
    expected = {"string": {"id": server.rows["alice"], "n": 8}, "absent": None}
    seen: dict[str, list[dict]] = {"string": [], "absent": []}

    async def one(http: httpx2.AsyncClient, session: str, request_id: int, kind: str) -> None:
        params = {"name": "scratchpad_read"}
        if kind == "string":
            params["arguments"] = json.dumps(expected["string"])
        reply = answers(await post(http, ALICE, session, {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                                                          "params": params}))
        seen[kind].append(reply[0]["result"]["structuredContent"])

    async def scenario(http: httpx2.AsyncClient) -> None:
        sessions = [await open_session(http, ALICE) for _ in range(2)]
        async with anyio.create_task_group() as group:
            for turn in range(20):  # ids 0-9 on each session, each session both kinds
                group.start_soon(one, http, sessions[turn // 10], turn % 10, ("string", "absent")[turn % 2])
    server.run(scenario)
    assert all(answer.get("content") == "CANARY-a" for answer in seen["string"]) and len(seen["string"]) == 10
    assert all(answer["error"].startswith("invalid arguments: arguments must be a JSON object, not null")
               for answer in seen["absent"]) and len(seen["absent"]) == 10


def test_before_initialized_a_call_with_raw_arguments_gets_the_callers_own_answer(db_path):
    """The SDK's gate opens with its initialize answer (no ``notifications/initialized`` needed): the middleware
    changes nothing there, and the call is alice's own read, as with object arguments."""
    server, replies = Server(db_path), []

    async def scenario(http: httpx2.AsyncClient) -> None:
        session = (await post(http, ALICE, None, INIT)).headers["mcp-session-id"]
        own = {"id": server.rows["alice"], "n": 5}
        for request_id, arguments in enumerate((own, json.dumps(own)), start=2):
            replies.append(answers(await post(http, ALICE, session, call(request_id, arguments)))[0]["result"])
    server.run(scenario)
    first, second = (reply["structuredContent"] for reply in replies)
    assert first == second and first["content"] == "CANAR" and server.calls == 2
