"""The OpenBao keyring talks to its configured address only: a redirect is refused (never followed with the token
header or a key in the body), and a proxy named by the environment is never used, so a loopback ``http`` address
stays on the machine."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from keys.errors import KeyUnavailable
from keys.openbao import OpenBaoKeyring

TOKEN = "s.transport-canary-token"


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Records each request's path and headers; answers ``reply`` (status, headers)."""

    seen: list[tuple[str, str]]
    reply: tuple[int, dict[str, str]]

    def _answer(self) -> None:
        self.seen.append((self.path, str(self.headers)))
        status, headers = self.reply
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_PUT = do_POST = do_DELETE = do_LIST = _answer

    def log_message(self, *args: object) -> None:
        return None


@contextmanager
def _server(reply: tuple[int, dict[str, str]]) -> Iterator[tuple[str, list[tuple[str, str]]]]:
    seen: list[tuple[str, str]] = []
    handler = type("Handler", (_Recorder,), {"seen": seen, "reply": reply})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def test_a_redirect_is_refused_and_the_token_never_reaches_where_it_points():
    with _server((200, {})) as (elsewhere, reached), \
            _server((307, {"Location": elsewhere + "/v1/stolen"})) as (addr, asked):
        keyring = OpenBaoKeyring(addr=addr, token=TOKEN, role_id=None)
        with pytest.raises(KeyUnavailable, match="redirect") as caught:
            keyring.set_password("scratchvault/owner", "v1", "a key that must not travel")
        assert asked, "the configured server was never asked"
        assert reached == []
        assert TOKEN not in str(caught.value)


def test_a_proxy_in_the_environment_is_not_used_for_the_server(monkeypatch):
    with _server((200, {})) as (proxy, proxied), _server((503, {})) as (addr, asked):
        for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.setenv(name, proxy)
        for name in ("NO_PROXY", "no_proxy"):
            monkeypatch.delenv(name, raising=False)
        keyring = OpenBaoKeyring(addr=addr, token=TOKEN, role_id=None)
        with pytest.raises(KeyUnavailable):
            keyring.get_password("scratchvault/owner", "v1")
        assert asked, "the configured server was never asked"
        assert proxied == []
