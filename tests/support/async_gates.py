"""Real components that hold a vault call at a gate, for the async facade's tests: a metrics hook, a stream and a
keyring, each a working instance of what the vault accepts, that waits where a slow real one would."""

from __future__ import annotations

import io
import threading

from keyring.backend import KeyringBackend

from keys.testing import MemoryKeyring

GATE_WAIT = 3.0  # how long a gate holds before it lets go on its own (then ``timed_out``: the test failed)


class Gate:
    """Open once; ``hold()`` waits until then, recording that a wait ran out (nobody opened it in time)."""

    def __init__(self) -> None:
        self.opened = threading.Event()
        self.timed_out = False

    def hold(self) -> None:
        if not self.opened.wait(GATE_WAIT):
            self.timed_out = True


class HeldReads(Gate):
    """A metrics hook holding each denied read's worker at the gate: how many wait there now and at most, and in
    which threads (the hook runs in the thread that made the vault call)."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()
        self.inside = self.peak = 0
        self.threads: set[threading.Thread] = set()
        self.arrivals = threading.Semaphore(0)

    def __call__(self, name: str, increment: int) -> None:
        with self.lock:
            self.threads.add(threading.current_thread())
        if name != "denied_reads":
            return
        with self.lock:
            self.inside += 1
            self.peak = max(self.peak, self.inside)
        self.arrivals.release()
        self.hold()
        with self.lock:
            self.inside -= 1

    def arrived(self, count: int) -> bool:
        """Wait (in a thread, not the loop) until ``count`` more reads reach the gate."""
        return all(self.arrivals.acquire(timeout=GATE_WAIT) for _ in range(count))


class HeldStream(io.RawIOBase, Gate):
    """A readable binary stream of SIZE bytes whose first read waits at the gate; a read after ``caller_gone``
    was set is counted in ``late_reads`` (the stream was still used behind its caller's back)."""

    SIZE = 20 * 2**20
    BYTE = b"z"

    def __init__(self) -> None:
        io.RawIOBase.__init__(self)
        Gate.__init__(self)
        self.started = threading.Event()
        self.sent = 0
        self.caller_gone = False
        self.late_reads = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        if self.caller_gone:
            self.late_reads += 1
        if not self.started.is_set():
            self.started.set()
            self.hold()
        count = min(len(buffer), self.SIZE - self.sent)
        buffer[:count] = self.BYTE * count
        self.sent += count
        return count


class HeldKeyring(MemoryKeyring, Gate):
    """A keyring whose reads wait at the gate (a slow D-Bus call) and say when the first one was asked."""

    def __init__(self) -> None:
        MemoryKeyring.__init__(self)
        Gate.__init__(self)
        self.asked = threading.Event()

    def get_password(self, service: str, username: str) -> str | None:
        self.asked.set()
        self.hold()
        return super().get_password(service, username)


KeyringBackend._classes.discard(HeldKeyring)  # never a candidate for keyring's auto-detection
