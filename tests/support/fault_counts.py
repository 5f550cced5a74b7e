"""Fault-injecting test doubles report here whether their fault fired: a test that armed a fault which never fired
tested nothing, and fails (tests/conftest.py checks after each test)."""

from __future__ import annotations

from typing import Protocol


class Fault(Protocol):
    def armed(self) -> bool:
        """Whether a fault was set up to fire in this test."""

    def fired(self) -> int:
        """How many calls the fault failed (or writes it dropped, replies it lost)."""


_made: list[Fault] = []


def register(fault: Fault) -> None:
    _made.append(fault)


def silent_faults() -> list[str]:
    """The faults made since the last call that were armed and never fired; forgets them all."""
    found = [repr(fault) for fault in _made if fault.armed() and not fault.fired()]
    _made.clear()
    return found
