"""A keyring told to log in with AppRole sends no token it did not get: hvac's client would otherwise take
VAULT_TOKEN, or ~/.vault-token, from the environment and send it with the login, to BAO_ADDR, which may be another
server than the one that token belongs to."""

from __future__ import annotations

import http.server
import threading
from typing import ClassVar

import pytest

from keys.errors import KeyUnavailable
from keys.openbao import OpenBaoKeyring

AMBIENT = "s.ambient-token-of-another-server"


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: ClassVar[list[str]] = []

    def _record(self) -> None:
        type(self).seen.append(self.headers.get("X-Vault-Token", ""))
        self.send_response(500)
        self.end_headers()

    do_GET = do_POST = do_PUT = _record

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize("source", ["VAULT_TOKEN", "~/.vault-token"])
def test_an_approle_login_carries_no_token_from_the_environment(source, tmp_path, monkeypatch):
    if source == "VAULT_TOKEN":
        monkeypatch.setenv("VAULT_TOKEN", AMBIENT)
    else:
        monkeypatch.delenv("VAULT_TOKEN", raising=False)
        monkeypatch.setenv("HOME", str(tmp_path))
        (tmp_path / ".vault-token").write_text(AMBIENT)
    secret = tmp_path / "secret-id"
    secret.write_text("not-a-real-secret-id")
    server = http.server.HTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Recorder.seen.clear()
    try:
        keyring = OpenBaoKeyring(addr=f"http://127.0.0.1:{server.server_address[1]}", role_id="role",
                                 secret_id_file=str(secret), token=None, token_file=None)
        with pytest.raises(KeyUnavailable):
            keyring.get_password("scratchvault/x/index", "index")
    finally:
        server.shutdown()
        server.server_close()
    assert _Recorder.seen, "the login reached the server"
    assert AMBIENT not in _Recorder.seen
