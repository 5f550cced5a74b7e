"""Fault-injecting test doubles report here whether their fault fired: a test that armed a fault which never fired
tested nothing, and fails (tests/conftest.py checks after each test).

A double either registers itself (``register``) with its own ``armed``/``fired``, or inherits :class:`FaultDouble`
and declares its on/off attributes as :class:`Switch` es: turning one on arms the double, and the double calls
``failed()`` for each call it failed."""

from __future__ import annotations

from typing import Any, Protocol


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


class FaultDouble:
    """A double whose faults are :class:`Switch` attributes (or armed from the start by ``arm()``); it counts in
    ``failures`` each call it failed, corrupted or lost."""

    failures = 0
    _armed = False

    def arm(self) -> None:
        """Mark the fault as set up to fire in this test (registered once)."""
        if not self._armed:
            self._armed = True
            register(self)

    def failed(self) -> None:
        self.failures += 1

    def armed(self) -> bool:
        return self._armed

    def fired(self) -> int:
        return self.failures

    def __repr__(self) -> str:
        return f"<{type(self).__module__}.{type(self).__qualname__}: armed, failed {self.failures} call(s)>"


class Switch:
    """An attribute of a :class:`FaultDouble` that turns a fault on (any true value: a flag, a mode, a set of
    operations) and off (a false one). Turning it on arms the double."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = "_switch_" + name

    def __get__(self, double: FaultDouble | None, owner: type | None = None) -> Any:
        if double is None:
            return self
        return double.__dict__.get(self.slot)

    def __set__(self, double: FaultDouble, value: Any) -> None:
        double.__dict__[self.slot] = value
        if value:
            double.arm()
