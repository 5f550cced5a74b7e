"""The store the vault-level suites run against (SCRATCHVAULT_TEST_STORE: ``sqlite``, the default, or
``postgres``) and its attacker class: the one place that picks them, for fixtures (tests/conftest.py) and for
parameters chosen at collection (the tables and layouts of the tamper suites)."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

STORE = os.environ.get("SCRATCHVAULT_TEST_STORE", "sqlite")


def attacker_class() -> type:
    """The attacker of the store under test (the two have the same operations)."""
    if STORE == "postgres":
        from tests.attacks.postgres_attacker import PostgresAttacker

        return PostgresAttacker
    from tests.attacks.sqlite_attacker import SqliteAttacker

    return SqliteAttacker


def store_module() -> ModuleType:
    """The module of the store under test's class (its batch sizes, which a test may shrink)."""
    return importlib.import_module(f"vault.storage.{STORE}.store")
