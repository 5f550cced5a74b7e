"""A server the suites need (PostgreSQL, a Citus cluster, OpenBao): when the test command promised it (its
``*_REQUIRED`` variable is 1) a server that cannot be used fails the test; run by hand without one, the test skips,
saying how to get it.

psycopg is imported inside :meth:`Component.connect`: the module imports (and the suites skip cleanly) without it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn

import pytest

if TYPE_CHECKING:
    import psycopg


@dataclass(frozen=True)
class Component:
    """A server by the name a message gives it, the variable that promises it, and how to get one."""

    name: str
    required_env: str
    remedy: str

    def required(self) -> bool:
        """True when the test command promised the server: then its absence fails the tests instead of skipping."""
        return os.environ.get(self.required_env) == "1"

    def unusable(self, reason: str) -> NoReturn:
        """Fail (the server was promised) or skip (a plain pytest run without one), saying why."""
        if self.required():
            pytest.fail(f"{self.required_env}=1 but {self.name} is unusable: {reason}")
        pytest.skip(f"{self.name} is not available ({reason}); {self.remedy}")

    def connect(self, url: str) -> psycopg.Connection:
        """An autocommit connection to a PostgreSQL node, or skip/fail when it cannot be reached."""
        try:
            import psycopg
        except ImportError as error:
            self.unusable(f"psycopg is not installed ({error}); pip install -e '.[test]'")
        try:
            return psycopg.connect(url, autocommit=True, connect_timeout=10)
        except psycopg.Error as error:
            self.unusable(f"cannot connect: {type(error).__name__}: {error}")
