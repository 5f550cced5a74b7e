"""Writers take turns, first come first served: this process's threads queue in order, then processes queue on a
lock file. SQLite's own wait for its write lock (the busy handler) polls with growing sleeps, up to 100 ms
between tries, so under contention a newcomer often wins over a writer that has waited for seconds (puts waited
up to 5 s while the lock was held for milliseconds at a time).

Across processes: ``<db>-lock`` is held for the whole write; ``<db>-lock-next`` by the one process waiting for
it next. Linux serves flock waiters in order, but a process that has just released a lock can take it again
before the waiter it woke runs; taking ``-next`` first puts it behind that waiter. Both are flock locks: they
die with their process, so a killed writer never blocks the others; a live holder that hangs makes the others
fail with StorageError after ``WRITE_WAIT`` seconds (the blocking flock runs in a helper thread that the
waiter stops waiting for). The files are advisory and only order writers: SQLite's own locks still keep the
database consistent, so a writer that does not take them (an older scratchvault, the sqlite3 shell) is safe,
only not queued. They hold no data; they are made 0600 like the database (paths.py).
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections import deque
from pathlib import Path

from vault.errors import StorageError

WRITE_WAIT = 30.0  # seconds a write may wait for its turn before StorageError (SQLite's busy timeout before)
_HELPER_IDLE = 10.0  # seconds the helper thread waits for another claim before it ends
_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


def lock_paths(database: Path) -> tuple[Path, Path]:
    """The lock file held while writing, and the one held by the next process in line."""
    return Path(f"{database}-lock"), Path(f"{database}-lock-next")


class _Turn:
    """A claim on the lock files through open files of its own (a flock belongs to an open file): one at a time
    per process, reused turn after turn; a claim given up while the helper waits for it is closed instead."""

    __slots__ = ("abandoned", "failed", "granted", "lock", "next", "next_held")

    def __init__(self, paths: tuple[Path, Path]) -> None:
        self.lock = self.next = -1
        self.granted = self.abandoned = self.failed = self.next_held = False
        try:
            self.lock = os.open(paths[0], _FLAGS, 0o600)
            self.next = os.open(paths[1], _FLAGS, 0o600)
        except OSError as error:
            self.close()
            raise StorageError(f"cannot open the write lock file ({error.strerror or type(error).__name__})") from None

    def try_take(self) -> bool:
        """Take the lock without waiting if no process waits for it: True if taken (else ``-next`` may be held)."""
        if not _flock(self.next, fcntl.LOCK_EX | fcntl.LOCK_NB):
            return False
        self.next_held = True
        if not _flock(self.lock, fcntl.LOCK_EX | fcntl.LOCK_NB):
            return False  # first in line: the helper waits for the lock, holding -next
        self._leave_line()
        return True

    def wait_take(self) -> None:
        """Queue for ``-next``, then wait for the lock holding it (blocking: only the helper thread calls this)."""
        if not self.next_held:
            _flock(self.next, fcntl.LOCK_EX)
            self.next_held = True
        _flock(self.lock, fcntl.LOCK_EX)
        self._leave_line()

    def unlock(self) -> None:
        """End the write: the lock goes to the next in line; the open files may serve another turn."""
        _flock(self.lock, fcntl.LOCK_UN)
        self.granted = False

    def _leave_line(self) -> None:
        _flock(self.next, fcntl.LOCK_UN)
        self.next_held = False

    def close(self) -> None:
        """Let go of both files: unlocked first, since a child forked meanwhile shares the open files."""
        for descriptor in (self.lock, self.next):
            if descriptor >= 0:
                fcntl.flock(descriptor, fcntl.LOCK_UN)
                os.close(descriptor)
        self.lock = self.next = -1


def _flock(descriptor: int, operation: int) -> bool:
    """flock; False when a non-blocking request finds the lock taken, StorageError on any other failure."""
    try:
        fcntl.flock(descriptor, operation)
    except BlockingIOError:
        return False
    except OSError as error:
        raise StorageError(f"cannot lock the write lock file ({error.strerror or type(error).__name__})") from None
    return True


class _Waiter:
    """The helper thread that blocks in flock for this process's writers, one claim at a time, so that a
    writer can stop waiting (a bound, or close) while the kernel keeps its place in line."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._claims: deque[_Turn] = deque()
        self._thread: threading.Thread | None = None
        self._closed = False

    def take(self, turn: _Turn, deadline: float) -> None:
        """Wait until ``turn`` holds the lock; StorageError at ``deadline`` or on close (the claim is dropped)."""
        with self._changed:
            if self._closed:
                raise StorageError("the vault is closed")
            self._claims.append(turn)
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name="scratchvault-writer-lock", daemon=True)
                self._thread.start()
            self._changed.notify_all()
            try:
                self._changed.wait_for(lambda: turn.granted or turn.failed or self._closed,
                                       max(0.0, deadline - time.monotonic()))
            finally:  # a timeout, close, or an exception (KeyboardInterrupt) while waiting: the helper lets go
                turn.abandoned = not turn.granted
            if turn.granted:
                return
        raise StorageError("the vault is closed" if self._closed else "cannot lock the write lock file" if turn.failed
                           else f"the database is busy: no write lock within {WRITE_WAIT:g} s (other processes "
                                "hold it or wait for it)")

    def _serve(self) -> None:
        """Take each claim in turn; end after a while with none (a new claim starts another helper)."""
        while True:
            with self._changed:
                if not self._changed.wait_for(lambda: self._claims or self._closed, _HELPER_IDLE) or not self._claims:
                    self._thread = None
                    return
                turn = self._claims.popleft()
            try:
                if not turn.abandoned:
                    turn.wait_take()
            except StorageError:
                turn.failed = True
            with self._changed:
                if turn.abandoned or turn.failed:
                    turn.close()
                else:
                    turn.granted = True
                self._changed.notify_all()

    def close(self) -> None:
        """Wake every waiting writer (they raise StorageError); the helper ends once its claims are settled."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()


class Writers:
    """The write lock of one store: FIFO among this process's threads, then in order across processes.
    Re-entrant for the thread holding it (a nested transaction then fails in SQLite, as it did before)."""

    def __init__(self, database: Path) -> None:
        self._paths = lock_paths(database)
        self._mutex = threading.Lock()
        self._queue: deque[_Gate] = deque()
        self._owner: int | None = None
        self._depth = 0
        self._turn: _Turn | None = None
        self._spare: _Turn | None = None
        self._files = _Waiter()
        self._closed = False

    def waiting(self) -> int:
        """How many of this process's threads wait for the write lock (queued, or for another process)."""
        with self._mutex:
            return len(self._queue) + (self._owner is not None and self._turn is None)

    def acquire(self) -> None:
        """Wait for this thread's turn, then for this process's; StorageError after WRITE_WAIT or on close."""
        deadline = time.monotonic() + WRITE_WAIT
        me = threading.get_ident()
        with self._mutex:
            if self._closed:
                raise StorageError("the vault is closed")
            if self._owner == me:
                self._depth += 1
                return
            gate = None
            if self._owner is None and not self._queue:
                self._owner = me
            else:
                gate = _Gate(me)
                self._queue.append(gate)
        if gate is not None:
            self._await(gate, deadline)
        try:
            turn = self._take_files(deadline)
        except BaseException:
            self._pass_on()
            raise
        with self._mutex:
            self._turn, self._depth = turn, 1

    def _take_files(self, deadline: float) -> _Turn:
        """This process's turn at the lock files, through the open files of the last turn when it ended well."""
        with self._mutex:
            turn, self._spare = self._spare, None
        turn = turn or _Turn(self._paths)
        try:
            if not turn.try_take():
                self._files.take(turn, deadline)
        except BaseException:
            if not turn.abandoned:  # an abandoned claim is the helper's to close
                turn.close()
            raise
        return turn

    def _await(self, gate: _Gate, deadline: float) -> None:
        """Wait for ``gate`` to open (this thread's turn); StorageError at the deadline or on close."""
        try:
            gate.event.wait(max(0.0, deadline - time.monotonic()))
        except BaseException:  # KeyboardInterrupt while queued: leave the line without blocking it
            if self._settle(gate):
                self._pass_on()
            raise
        if not self._settle(gate):
            raise StorageError("the vault is closed" if self._closed else
                               f"the database is busy: no write lock within {WRITE_WAIT:g} s")

    def _settle(self, gate: _Gate) -> bool:
        """Whether the turn is now this gate's (perhaps handed over just as the wait ran out); if not, the gate
        leaves the queue (and a turn handed to it after close goes on)."""
        with self._mutex:
            if self._owner != gate.thread:
                self._queue.remove(gate)
                return False
            if not self._closed:
                return True
            self._owner = None
            self._hand_over()
            return False

    def release(self) -> None:
        """End one use; the last lets go of the lock files and opens the next thread's gate."""
        with self._mutex:
            self._depth -= 1
            if self._depth:
                return
            turn, self._turn = self._turn, None
        if turn is not None:
            self._let_go(turn)
        self._pass_on()

    def _let_go(self, turn: _Turn) -> None:
        """Unlock the lock file and keep its open files for the next turn (closed if the store is)."""
        try:
            turn.unlock()
        except StorageError:
            turn.close()
            return
        with self._mutex:
            kept = self._spare is None and not self._closed
            if kept:
                self._spare = turn
        if not kept:
            turn.close()

    def _pass_on(self) -> None:
        with self._mutex:
            self._owner = None
            self._hand_over()

    def _hand_over(self) -> None:
        """Give the turn to the first queued thread (the mutex held)."""
        if self._queue and not self._closed:
            gate = self._queue.popleft()
            self._owner = gate.thread
            gate.event.set()

    def close(self) -> None:
        """Fail every waiting writer with StorageError; the one writing finishes and lets go as usual."""
        with self._mutex:
            self._closed = True
            for gate in self._queue:
                gate.event.set()
            spare, self._spare = self._spare, None
        if spare is not None:
            spare.close()
        self._files.close()


class _Gate:
    """One queued thread's turn: set when the turn is handed to it (or the store closes)."""

    __slots__ = ("event", "thread")

    def __init__(self, thread: int) -> None:
        self.thread = thread
        self.event = threading.Event()
