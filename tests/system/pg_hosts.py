"""What the PostgreSQL system tests share: hosts as separate processes, a superuser's view of a vault's schema, and
the test server killed and started again.

A host is ``python -c`` with its own working directory and HOME (and XDG directories), the repository on its
PYTHONPATH, and this process's DBUS_SESSION_BUS_ADDRESS, so every host reaches the one Secret Service the test
command started. The test drives it with one JSON line per call (``{"op": "put", "vault": "main", ...}``) and reads
one JSON line back: ``{"ok": value}`` or ``{"error": "NotFound"}`` (a VaultError's class name, never its text).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.support.repository import calling, child_env

HOST = calling("tests.system.pg_hosts.host_main")
REPLY_SECONDS = 60  # a host that has not answered by then is stuck: the test fails instead of hanging


class HostError(Exception):
    """A VaultError a host's call raised; the message is its class name (``NotFound``, ``KeyUnavailable``)."""


class Host:
    """One host: a process of its own, with one or more Vaults open on the same database URL."""

    def __init__(self, name: str, url: str, root: Path) -> None:
        self.name = name
        self.workdir, self.home = root / name / "work", root / name / "home"
        env = child_env(HOME=str(self.home), PYTHONUNBUFFERED="1", XDG_DATA_HOME=str(self.home / ".local/share"),
                        XDG_CONFIG_HOME=str(self.home / ".config"), XDG_CACHE_HOME=str(self.home / ".cache"))
        env.pop("PYTHON_KEYRING_BACKEND", None)
        for directory in (self.workdir, self.home / ".local/share", self.home / ".config", self.home / ".cache"):
            directory.mkdir(parents=True, mode=0o700)
        self._stderr = (root / name / "stderr").open("w+")
        self._process = subprocess.Popen([sys.executable, "-c", HOST, url], cwd=self.workdir, env=env, text=True,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr)
        self._replies: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read_replies, daemon=True).start()

    def _read_replies(self) -> None:
        for line in self._process.stdout:
            self._replies.put(line)
        self._replies.put(None)  # the host exited: a reply still awaited never comes

    def send(self, op: str, vault: str = "main", **arguments: Any) -> None:
        """Start a call without waiting for its reply (two hosts racing: send to both, then ``reply``)."""
        self._process.stdin.write(json.dumps({"op": op, "vault": vault, **arguments}) + "\n")
        self._process.stdin.flush()

    def reply(self) -> Any:
        """The value of the oldest call not yet answered; HostError when it raised a VaultError."""
        try:
            line = self._replies.get(timeout=REPLY_SECONDS)
        except queue.Empty:
            line = None
        if line is None:
            raise AssertionError(f"host {self.name} did not answer: {self.stderr_tail()}")
        answer = json.loads(line)
        if "error" in answer:
            raise HostError(answer["error"])
        return answer["ok"]

    def __call__(self, op: str, vault: str = "main", **arguments: Any) -> Any:
        self.send(op, vault, **arguments)
        return self.reply()

    def stderr_tail(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read()[-3000:]

    def finish(self) -> None:
        """Tell it to close its vaults and exit (``close`` waits for that; finish every host first)."""
        with contextlib.suppress(OSError):
            self._process.stdin.close()

    def close(self) -> None:
        """Close its vaults and wait for it to exit."""
        self.finish()
        try:
            self._process.wait(timeout=30)
        finally:
            if self._process.poll() is None:
                self._process.kill()
                self._process.wait()
            self._stderr.close()
        assert self._process.returncode == 0, f"host {self.name} failed: {self.stderr_tail()}"


def host_main() -> None:
    """The host process: argv[1] is the database URL; answers one JSON line per JSON line read."""
    from keyring.backends import SecretService

    from vault import Principal, Vault, VaultError

    url, vaults = sys.argv[1], {}
    for line in sys.stdin:
        call = json.loads(line)
        if "at" in call:  # a race: start together with the other host
            time.sleep(max(0.0, call["at"] - time.time()))
        try:
            if call["op"] == "open":
                vaults[call["vault"]] = Vault.open(url, keyring_backend=SecretService.Keyring(),
                                                   key_cache_seconds=call.get("key_cache_seconds", 300))
                answer: dict = {"ok": None}
            else:
                answer = {"ok": _OPS[call["op"]](vaults[call["vault"]], Principal(call.get("user", "-")), call)}
        except VaultError as error:
            answer = {"error": type(error).__name__}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    for vault in vaults.values():
        vault.close()


def _record(record: Any) -> dict:
    return {"content": record.content, "key_version": record.key_version, "expires_at": record.expires_at,
            "turn_id": record.turn_id, "step_num": record.step_num}


_OPS = {
    "put": lambda v, who, c: v.put(who, c["turn"], c["step"], "host", c["content"], ttl_seconds=c.get("ttl", 3600)).id,
    "get": lambda v, who, c: _record(v.get(who, c["id"])),
    "read": lambda v, who, c: v.read(who, c["id"], c["mode"], c.get("n", 2000), start=c.get("start"),
                                     end=c.get("end")).content,
    "list": lambda v, who, c: [[rep.id, rep.step_num, rep.summary] for rep in v.list_for_turn(who, c["turn"])],
    "has_rows": lambda v, who, c: v.has_rows(who, c["turn"]),
    "extend": lambda v, who, c: v.extend_turn(who, c["turn"], c["ttl"]),
    "rotate": lambda v, who, c: v.rotate_owner_key(who.user_id),
    "rewrap": lambda v, who, c: v.rewrap(who.user_id),
    "retire": lambda v, who, c: v.retire_old_key_versions(who.user_id),
    "shred": lambda v, who, c: v.shred_owner(who.user_id),
}


# -- the server, as its superuser sees it -----------------------------------------------------------------------------
def admin(url: str) -> psycopg.Connection:
    """A superuser connection (autocommit) to the test server, in the database and schema the vault ``url``
    names (the vault's URL may log in as a least-privilege role)."""
    params = psycopg.conninfo.conninfo_to_dict(url)
    server = psycopg.conninfo.conninfo_to_dict(os.environ["SCRATCHVAULT_TEST_POSTGRES"])
    params.pop("password", None)
    params["user"] = server.get("user", "postgres")
    return psycopg.connect(psycopg.conninfo.make_conninfo(**params), autocommit=True)


def orphans(connection: psycopg.Connection) -> dict[str, int]:
    """Chunks and summaries whose row does not exist (a half-written put would leave some)."""
    return {table: connection.execute(f"SELECT count(*) FROM {table} WHERE seq NOT IN (SELECT seq FROM rows)"
                                      ).fetchone()[0] for table in ("chunks", "summaries")}


def server_control() -> tuple[Path, Path]:
    """The test server's data directory and pg_ctl, from the test command's environment (skipped without them,
    failed when the test command said PostgreSQL is required)."""
    data, pg_ctl = os.environ.get("SCRATCHVAULT_TEST_PGDATA"), os.environ.get("SCRATCHVAULT_TEST_PGCTL")
    if not (data and pg_ctl and os.environ.get("SCRATCHVAULT_TEST_POSTGRES")):
        if os.environ.get("SCRATCHVAULT_POSTGRES_REQUIRED") == "1":
            pytest.fail("SCRATCHVAULT_POSTGRES_REQUIRED=1 but SCRATCHVAULT_TEST_PGDATA or _PGCTL is not set")
        pytest.skip("no PostgreSQL server this test may kill (SCRATCHVAULT_TEST_PGDATA, SCRATCHVAULT_TEST_PGCTL)")
    return Path(data), Path(pg_ctl)


@contextlib.contextmanager
def server_killed(data: Path, pg_ctl: Path, log: Path) -> Iterator[None]:
    """The server SIGKILLed on entry and started again on exit, also when the block fails (the suite goes on)."""
    postmaster = kill_server(data)
    try:
        yield
    finally:
        start_server(data, pg_ctl, postmaster, log)


def kill_server(data: Path) -> int:
    """SIGKILL the postmaster and every process it started, at once (a crash: no shutdown checkpoint); returns its
    pid once none of them runs (a process left unreaped counts as gone)."""
    postmaster = int((data / "postmaster.pid").read_text().split()[0])
    children = [pid for pid in _pids() if _status(pid).get("PPid") == str(postmaster)]
    for pid in (postmaster, *children):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    _wait(lambda: all(_status(pid).get("State", "Z").startswith("Z") for pid in (postmaster, *children)),
          "the killed server's processes to exit")
    return postmaster


def start_server(data: Path, pg_ctl: Path, dead_postmaster: int, log: Path) -> None:
    """Start the server again as the postgres account, with the options it ran with (postmaster.opts), and wait
    until it accepts connections. A dead postmaster nobody has reaped yet still owns its lock files in
    PostgreSQL's eyes: they are removed then, as an operator would after a crash."""
    options = shlex.split((data / "postmaster.opts").read_text())[1:]
    while options[:1] == ["-D"]:
        options = options[2:]
    command = ["runuser", "-u", "postgres", "--", str(pg_ctl), "-D", str(data), "-w", "-t", "60", "start",
               "-o", shlex.join(options)]
    deadline = time.monotonic() + 90
    with log.open("ab") as output:
        while True:
            if _status(dead_postmaster).get("State", "").startswith("Z"):
                _remove_lock_files(data, dead_postmaster)
            started = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=output, stderr=output, check=False)
            if started.returncode == 0:
                break
            assert time.monotonic() < deadline, f"the server did not start again: {log.read_text()[-2000:]}"
            time.sleep(0.5)
    _wait(_accepts_connections, "the restarted server to accept connections")


def _accepts_connections() -> bool:
    try:
        psycopg.connect(os.environ["SCRATCHVAULT_TEST_POSTGRES"], connect_timeout=5).close()
    except psycopg.OperationalError:
        return False
    return True


def _remove_lock_files(data: Path, pid: int) -> None:
    """The data directory's and the sockets' lock files, if they still name ``pid``."""
    try:
        lines = (data / "postmaster.pid").read_text().splitlines()
    except FileNotFoundError:
        return
    port, sockets = [*lines, "", ""][3:5]
    for lock in (data / "postmaster.pid", *(Path(d) / f".s.PGSQL.{port}.lock" for d in sockets.split(",") if d)):
        with contextlib.suppress(FileNotFoundError, IndexError):
            if lock.read_text().split()[0] == str(pid):
                lock.unlink()


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _status(pid: int) -> dict[str, str]:
    """A process's /proc status fields ({} once it is gone)."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return {}
    return dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)


def _wait(condition: Any, what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)
