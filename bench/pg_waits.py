"""Where a PostgreSQL load run's server sessions spend their time: ``pg_stat_activity`` sampled from a thread of
the parent while the children run, every session of the database but the sampler's own, counted by what it is
doing (``active``: running, or waiting on the named event; ``idle in transaction``: waiting for the client inside
a transaction; ``idle``: between transactions, the client busy elsewhere or no work)."""

from __future__ import annotations

import threading
from collections import Counter
from types import TracebackType

import psycopg

INTERVAL = 0.05  # seconds between samples: about 1% of a core on this machine, 20 samples a second
QUERY = """SELECT state, wait_event_type, wait_event FROM pg_stat_activity
           WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()"""


class WaitSampler:
    """A thread sampling the server's sessions while the ``with`` block runs; ``counts`` by what each did."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.counts: Counter[str] = Counter()
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> WaitSampler:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as connection:
            while not self._stop.wait(INTERVAL):
                found = connection.execute(QUERY).fetchall()
                if len(found) <= 1:
                    continue  # before the children connect, or after they left: not the load
                self.samples += 1
                self.counts.update(describe(state, kind, event) for state, kind, event in found)

    def render(self) -> str:
        """Each activity's share of the sessions seen, largest first (sessions per sample on average too)."""
        seen = sum(self.counts.values())
        if not seen:
            return "server sessions: none sampled"
        shares = ", ".join(f"{what} {count / seen:.0%}" for what, count in self.counts.most_common(12))
        return (f"server sessions, sampled every {INTERVAL * 1000:.0f} ms ({self.samples:,} samples, "
                f"{seen / self.samples:.1f} sessions each): {shares}")


def describe(state: str | None, kind: str | None, event: str | None) -> str:
    """A session's activity as one label: its state, and the event it waits on if any."""
    if state == "active":
        return "active, running" if event is None else f"active, waiting {kind}:{event}"
    return state or "unknown"
