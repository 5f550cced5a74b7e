"""What ``pip install 'scratchvault[<extra>]'`` puts within an importer's reach: the standard library, the
package's own top-level packages, and every distribution its run-time dependencies and its user-facing extras
(all but ``test``) pull in, transitively. A module outside that set works only from a clone with the test extra."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from functools import cache
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support.repository import ROOT

TEST_ONLY_EXTRAS = frozenset({"test"})


def imported_roots(source: str) -> set[str]:
    """The top-level module of every absolute import in ``source``."""
    roots: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


@cache
def installable_roots() -> frozenset[str]:
    """Top-level modules a user's install provides: stdlib, the package's own, its dependencies' (extras too)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    own = {name.split(".")[0] for name in project["tool"]["setuptools"]["packages"]["find"]["include"]}
    extras = set(project["project"]["optional-dependencies"]) - TEST_ONLY_EXTRAS
    wanted = [Requirement(line) for line in project["project"]["dependencies"]]
    for extra in extras:
        wanted += [Requirement(line) for line in project["project"]["optional-dependencies"][extra]]
    dists = _closure({canonicalize_name(req.name) for req in wanted})
    provided = {module for module, owners in metadata.packages_distributions().items()
                if any(canonicalize_name(owner) in dists for owner in owners)}
    return frozenset(set(sys.stdlib_module_names) | own | provided)


def _closure(names: set[str]) -> set[str]:
    """``names`` and every distribution they require (markers evaluated without extras), as installed here."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for line in requires:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(canonicalize_name(req.name))
    return seen


def python_blocks(markdown: Path) -> list[str]:
    """Every fenced Python block of a Markdown file."""
    return re.findall(r"```python\n(.*?)```", markdown.read_text(), re.S)
