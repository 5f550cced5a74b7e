"""The import graph of keys/: no cycle among its modules, counting imports inside functions and under
TYPE_CHECKING too; only keys/crypto/aead.py imports ``cryptography.hazmat``; nothing in keys/ imports vault/."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.repository import ROOT

KEYS = ROOT / "keys"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(tree: ast.AST, modules: set[str]) -> set[str]:
    """Every module of ``modules`` an import anywhere in ``tree`` names (``from keys.x import y`` names keys.x.y
    when that is a module, else keys.x)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in modules else node.module
                      for alias in node.names}
    return found & modules


def graph() -> dict[str, set[str]]:
    trees = {module_name(path): ast.parse(path.read_text()) for path in KEYS.rglob("*.py")}
    modules = set(trees)
    return {name: imported(tree, modules) - {name} for name, tree in trees.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected part of more than one module (depth-first search)."""
    found, state = [], dict.fromkeys(edges, 0)  # 0 unvisited, 1 on the path, 2 done

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for target in sorted(edges[name]):
            if state[target] == 1:
                found.append([*path[path.index(target):], target])
            elif state[target] == 0:
                visit(target, [*path, target])
        state[name] = 2

    for name in sorted(edges):
        if state[name] == 0:
            visit(name, [name])
    return found


def test_no_module_of_keys_imports_itself_through_others():
    assert cycles(graph()) == []


def test_the_check_finds_a_cycle_when_there_is_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c", "a"]]


def test_only_the_aead_module_imports_hazmat_and_nothing_imports_vault():
    hazmat, vault = [], []
    for path in KEYS.rglob("*.py"):
        names = {alias.name for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Import)
                 for alias in node.names}
        names |= {node.module or "" for node in ast.walk(ast.parse(path.read_text()))
                  if isinstance(node, ast.ImportFrom)}
        if any(name.startswith("cryptography.hazmat") for name in names):
            hazmat.append(module_name(path))
        if any(name == "vault" or name.startswith("vault.") for name in names):
            vault.append(module_name(path))
    assert hazmat == ["keys.crypto.aead"] and vault == []
