"""The repository the tests run in, and what a child process needs to import its code and its tests.

A child gets the repository root through the ``PYTHONPATH`` of its environment, never through ``sys.path``
edits in its own code: ``python -c "from tests.system.test_crash import child_main; child_main()"`` then imports
this tree's ``vault``, ``keys`` and ``tests``.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment with the repository root first on PYTHONPATH, plus ``extra``."""
    paths = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), **extra}


def calling(function: str) -> str:
    """``python -c`` code that runs ``function`` (``"tests.system.test_crash.child_main"``) with no arguments."""
    module, name = function.rsplit(".", 1)
    return f"from {module} import {name}; {name}()"
