"""Which tests a run takes: the quick tier (``pytest --quick``, ``bash scripts/run test --quick``) and the tests the
PostgreSQL pass runs again (``--store-tests-only``, marked ``store`` at collection).

A test is ``store`` when its outcome may change with SCRATCHVAULT_TEST_STORE: it uses a fixture of the store under
test (those built on them, such as ``vault``, ``attacker`` or the crash templates, reach its fixture closure too), or
its module picks the store itself from tests/attacks/stores.py. The rest open a SQLite file by path, or the
PostgreSQL server by the ``pg_*`` fixtures, or nothing, the same way in both passes.

The quick tier leaves out what needs the PostgreSQL, OpenBao or Citus servers (it starts none) and the slow
multi-process tests other than the crash campaigns, which it keeps with fewer kill points (SCRATCHVAULT_CRASH_KILLS)
and the key bookkeeping state machine with fewer examples (SCRATCHVAULT_MACHINE_EXAMPLES).

Loaded by tests/conftest.py (its hooks re-exported there)."""

from __future__ import annotations

import os

import pytest

from tests.attacks import stores

STORE_FIXTURES = frozenset({"db_path", "location_named", "attacker_for"})
# what a test module imports from tests/attacks/stores.py to pick the store itself, with no fixture
STORE_PICKERS = ("STORE", "attacker_class", "store_module")
KILLS_ENV = "SCRATCHVAULT_CRASH_KILLS"
QUICK_KILLS = "4"  # per campaign: enough for kills inside the operation and spread over it (crash_campaign.py)
QUICK_MACHINE_EXAMPLES = "2"
# slow tests the quick tier keeps: the crash campaigns, at QUICK_KILLS
QUICK_SLOW = ("tests/system/test_crash.py::", "tests/system/test_crash_operations.py::")


def crash_kills(default: int) -> int:
    """Kill points per crash campaign: ``default``, unless SCRATCHVAULT_CRASH_KILLS names another number."""
    return int(os.environ.get(KILLS_ENV) or default)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("scratchvault")
    group.addoption("--quick", action="store_true",
                    help="the everyday tier: no PostgreSQL server, no slow multi-process tests but the crash "
                         "campaigns, and those with fewer kills")
    group.addoption("--store-tests-only", action="store_true",
                    help="only the tests marked store (the ones SCRATCHVAULT_TEST_STORE changes)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "store: uses the store under test (SCRATCHVAULT_TEST_STORE), so the "
                                       "PostgreSQL pass runs it again; set at collection")
    if config.getoption("quick"):
        # before collection: the crash modules read their kill counts when imported
        os.environ.setdefault(KILLS_ENV, QUICK_KILLS)
        os.environ.setdefault("SCRATCHVAULT_MACHINE_EXAMPLES", QUICK_MACHINE_EXAMPLES)


def uses_the_store_under_test(item: pytest.Item) -> bool:
    if STORE_FIXTURES.intersection(getattr(item, "fixturenames", ())):
        return True
    module = getattr(item, "module", None)
    return any(getattr(module, name, None) is getattr(stores, name) for name in STORE_PICKERS)


def in_quick_tier(item: pytest.Item) -> bool:
    if any(item.get_closest_marker(server) is not None for server in ("postgres", "openbao", "citus")):
        return False
    return item.get_closest_marker("slow") is None or item.nodeid.startswith(QUICK_SLOW)


def select(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect (reported as such) what ``--quick`` or ``--store-tests-only`` leaves out; call after marking."""
    kept = [item for item in items
            if (not config.getoption("quick") or in_quick_tier(item))
            and (not config.getoption("store_tests_only") or item.get_closest_marker("store") is not None)]
    if len(kept) < len(items):
        chosen = set(map(id, kept))
        config.hook.pytest_deselected(items=[item for item in items if id(item) not in chosen])
        items[:] = kept
