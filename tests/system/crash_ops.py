"""Killing one vault operation at a chosen point of its own run, for tests/system/test_crash_operations.py.

A ``python -c`` child (the *zygote*, the repository root on its PYTHONPATH) imports the vault once and then, for
every request on its stdin, forks a *worker* that opens the given copy of a vault (keys in a ``FileKeyring``),
writes ``start <monotonic> <wall clock>`` on the shared stdout pipe, runs the one operation asked for (writing
``ack <what>`` after each step it has committed), writes ``end <monotonic>`` and then waits to be killed. The test
process SIGKILLs the worker by its pid at ``start + fraction * duration``, or after ``end`` to time an un-killed
run; the zygote reaps it and writes ``exit <status>``. Forking an imported interpreter makes a kill cost a fork
and an open (a few ms) instead of an interpreter start-up (~0.3 s), and the timer starts when the operation
does. ``time.monotonic`` is the system-wide CLOCK_MONOTONIC on Linux, so both processes read the same clock.

A worker never ends on its own (only after a minute, if nobody kills it): its pid cannot be reused by another
process before the test process's kill reaches it.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.repository import calling, child_env

ZYGOTE = calling("tests.system.crash_ops.serve")
PATIENCE = 60.0  # seconds any step of a worker may take before the test gives up on it


def _say(line: str) -> None:
    data = (line + "\n").encode()
    assert os.write(1, data) == len(data)  # one write per line: a kill cannot cut it (below PIPE_BUF)


def _operate(vault, operation: str, args: dict) -> None:
    """Run one operation on ``vault``, announcing each committed step with ``ack``."""
    from vault import Principal

    def ack(value: object) -> None:
        _say(f"ack {value}")

    if operation == "gc":
        vault.gc(progress=ack)
    elif operation == "shred":
        vault.shred_owner(args["user"], progress=ack)
    elif operation == "rewrap":
        vault.rewrap(progress=ack, **args)
    elif operation == "extend":
        ack(vault.extend_turn(Principal(args["user"]), args["turn"], args["ttl"]))
    elif operation == "delete":
        for user, row in args["rows"]:
            vault.delete(Principal(user), row)
            ack(row)
    elif operation == "rotate":
        for user in args["users"]:
            ack(f"{user} {vault.rotate_owner_key(user)}")
    else:
        raise ValueError(f"no operation {operation!r}")


def _work(request: dict) -> None:
    """The forked worker: open, announce the start, operate, announce the end, wait for the kill."""
    from tests.support.file_keyring import FileKeyring
    from vault import Vault

    try:
        vault = Vault.open(request["db"], keyring_backend=FileKeyring(request["ring"]))
        _say(f"start {time.monotonic()!r} {time.time()!r}")
        _operate(vault, request["operation"], request["args"])
        _say(f"end {time.monotonic()!r}")
    except BaseException:
        traceback.print_exc()
        _say("error")
    time.sleep(PATIENCE)  # the test kills us long before; never exit early (see the module docstring)
    os._exit(3)


def serve() -> None:
    """The zygote: import once, shrink the store's batch sizes as its argument (JSON) says, then fork a worker per
    request line (JSON) and report its pid and exit."""
    import tests.support.file_keyring  # noqa: F401  (imported before the fork, not after)
    import vault  # noqa: F401
    from tests.attacks.stores import store_module

    for name, size in json.loads(sys.argv[1]).items():
        assert isinstance(getattr(store_module(), name), int), f"no batch size {name}"
        setattr(store_module(), name, size)
    _say("ready")
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            try:
                _work(request)
            finally:
                os._exit(4)
        _say(f"pid {pid}")
        _, status = os.waitpid(pid, 0)
        _say(f"exit {status}")


@dataclass
class Run:
    """What one worker did: when it started (monotonic and wall clock), its acks, its end (None: killed before
    it ended), the duration its kill point was a fraction of, when the kill was meant to come and when it was
    sent (monotonic)."""

    start: float
    wall_start: float
    acks: list[str] = field(default_factory=list)
    end: float | None = None
    duration: float = 0.0
    planned: float = 0.0
    killed_at: float = 0.0

    @property
    def inside(self) -> bool:
        """The kill landed while the operation ran (after its start, before its end)."""
        return self.end is None and self.killed_at > self.start

    @property
    def fraction(self) -> float:
        """Where the kill landed, as a fraction of the duration it was planned in."""
        return (self.killed_at - self.start) / self.duration


class Zygote:
    """The test process's side: start the zygote, have it run operations, kill them."""

    def __init__(self, errors: Path, batches: dict[str, int] | None = None) -> None:
        """``batches``: sizes set in the store's module (tests/attacks/stores.py) before any worker forks."""
        self._errors = open(errors, "w+")
        self._child = subprocess.Popen([sys.executable, "-c", ZYGOTE, json.dumps(batches or {})], stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, stderr=self._errors, text=True, env=child_env())
        self._lines: queue.Queue[str] = queue.Queue()
        self._worker: int | None = None  # the pid of the worker not yet reaped
        threading.Thread(target=lambda: [self._lines.put(line) for line in self._child.stdout], daemon=True).start()
        assert self._next() == "ready"

    def _next(self) -> str:
        try:
            line = self._lines.get(timeout=PATIENCE)
        except queue.Empty:
            raise AssertionError(f"the zygote said nothing for {PATIENCE} s: {self.errors()}") from None
        assert line.endswith("\n"), f"a line was cut short: {line!r}"
        return line.strip()

    def errors(self) -> str:
        self._errors.seek(0)
        return self._errors.read()[-3000:]

    def run(self, db: str | Path, ring: Path, operation: str, args: dict, fraction: float | None,
            duration: float = 0.0) -> Run:
        """Run ``operation`` in a worker on this copy; kill it at ``fraction`` of ``duration`` after its start,
        or (``fraction`` None) once it has ended."""
        request = {"db": str(db), "ring": str(ring), "operation": operation, "args": args}
        self._child.stdin.write(json.dumps(request) + "\n")
        self._child.stdin.flush()
        run = None
        while self._worker is None or run is None:
            word, _, rest = self._next().partition(" ")
            assert word in ("pid", "start"), f"worker failed before its operation started: {self.errors()}"
            if word == "pid":
                self._worker = int(rest)
            else:
                run = Run(*map(float, rest.split()))
        if fraction is None:
            while not (line := self._next()).startswith(("end", "error")):
                run.acks.append(line.removeprefix("ack "))
            assert line != "error", f"the operation failed: {self.errors()}"
            run.end = float(line.split()[1])
        else:
            run.duration, run.planned = duration, run.start + fraction * duration
            time.sleep(max(0.0, run.planned - time.monotonic()))
        before = time.monotonic()
        os.kill(self._worker, signal.SIGKILL)
        run.killed_at = (before + time.monotonic()) / 2
        self._collect(run)
        return run

    def _collect(self, run: Run) -> None:
        """Read what the worker said until the zygote reports it reaped; it must have died of the kill."""
        while not (line := self._next()).startswith("exit"):
            word, _, rest = line.partition(" ")
            assert word != "error", f"the operation failed: {self.errors()}"
            if word == "ack":
                run.acks.append(rest)
            elif word == "end":
                run.end = float(rest)
        self._worker = None
        status = int(line.split()[1])
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, f"worker status {status}"

    def close(self) -> None:
        """End the zygote (its stdin closes, its loop ends) and wait for it; a worker a failed run left waiting
        is killed first, if it is still the zygote's unreaped child (so its pid cannot be another process's)."""
        if self._worker is not None:
            try:
                stat = Path(f"/proc/{self._worker}/stat").read_text()
            except OSError:
                stat = ""
            if stat and int(stat.rsplit(")", 1)[1].split()[1]) == self._child.pid:
                os.kill(self._worker, signal.SIGKILL)
        self._child.stdin.close()
        self._child.wait(timeout=PATIENCE)
        self._child.stdout.close()
        self._errors.close()
