"""A wall clock the test moves by hand (expiry is tested without sleeping)."""

from __future__ import annotations

T0 = 1_800_000_000.0


class FakeClock:
    """Returns ``now``; tests set it or ``advance`` it."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
