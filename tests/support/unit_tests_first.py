"""A pytest plugin for the mutation runs (tests/support/mutation_testing.py loads it): the tests of tests/unit run
before the others, so a mutant they catch ends its run (mutmut passes -x) before the slower tests of tests/keys."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: not item.nodeid.startswith("tests/unit/"))  # stable: each part keeps its order
