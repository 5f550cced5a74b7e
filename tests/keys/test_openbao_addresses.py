"""The address check and what requests connects to agree: an address that urlsplit reads as a loopback IP while
urllib3 (which requests uses) reads another host is refused, so plain http never leaves the machine; and doctor
calls plain http plain http whatever the scheme's case."""

from __future__ import annotations

import http.server
import socket
import threading
from typing import ClassVar

import pytest

from keys.errors import KeyUnavailable
from keys.openbao import OpenBaoConfig, OpenBaoKeyring
from keys.openbao.doctor import _tls


def _outward_ip() -> str:
    """An address of this machine that is not loopback (where a listener stands for another host)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outward interface
        return str(probe.getsockname()[0])


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).seen.append(self.headers.get("X-Vault-Token", ""))
        self.send_response(500)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize("template", ["http://{host}:{port}\\@127.0.0.1:8200", "http://{host}:{port}\\@[::1]:8200"])
def test_an_address_read_as_loopback_by_one_parser_and_as_another_host_by_requests_is_refused(template):
    host = _outward_ip()
    if host.startswith("127."):
        pytest.skip("no non-loopback address on this machine")
    server = http.server.HTTPServer((host, 0), _Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        addr = template.format(host=host, port=server.server_address[1])
        with pytest.raises(KeyUnavailable, match="address"):
            OpenBaoKeyring(addr=addr, token="s.not-a-real-token").get_password("scratchvault/x/index", "index")
    finally:
        server.shutdown()
        server.server_close()
    assert _Recorder.seen == []  # nothing, no token, crossed to the other host in clear


def test_an_address_with_a_user_part_is_refused():
    with pytest.raises(KeyUnavailable, match="address"):
        OpenBaoConfig(addr="https://user@127.0.0.1:8200", token="s.not-a-real-token")


def test_doctor_calls_an_upper_case_http_scheme_plain_http():
    keyring = OpenBaoKeyring(addr="HTTP://127.0.0.1:9", token="s.not-a-real-token")
    status, text = _tls(keyring)
    assert status == "warn" and "plain http" in text


@pytest.mark.parametrize("addr", ["https://bücher.example:8200", "https://[fe80::1%25eth0]:8200", "http://[::1]:8200",
                                  "HTTP://127.0.0.1:8200", "https://bao.internal:8200/sub"])
def test_plain_addresses_stay_accepted(addr):
    OpenBaoConfig(addr=addr, token="s.not-a-real-token")
