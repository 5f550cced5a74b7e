"""Checkers for the house rules (tests/test_house_rules.py), over source text only: nothing of the code they judge
is imported, so a broken module is reported, not crashed on. Each takes a root directory, so the rules can be
shown on toy trees as well as on the repository."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

MAX_PARAMETERS = 6  # besides self / cls

# the word issue, PR, pull request, bug or ticket before a number (with or without "#"), GH- and a number, and a
# "#" before a number that is not inside a word, URL or HTML entity
ISSUE_NUMBER = re.compile(r"\b(?:issues?|PR|pull request|bug|ticket)\s*#?\d+\b|\bGH-\d+\b|(?<![\w&/#])#\d+\b",
                          re.IGNORECASE)
# 7 to 40 lowercase hex digits with at least one digit and one letter, alone (not part of a longer run or word,
# so 0x-literals and 64-digit digests are data, not commit names)
COMMIT_HASH = re.compile(r"(?<![\w-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![\w-])")


def python_files(root: Path, folders: tuple[str, ...]) -> Iterator[Path]:
    for folder in folders:
        yield from sorted((root / folder).rglob("*.py"))


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(tree: ast.AST) -> set[int]:
    """The ids of import nodes under ``if TYPE_CHECKING:``: for annotations only, never run."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(inner) for stmt in node.body for inner in ast.walk(stmt))
    return skipped


def imported_modules(name: str, is_package: bool, tree: ast.AST, known: set[str]) -> set[str]:
    """The modules among ``known`` that module ``name`` imports anywhere in its body (functions too): relative
    imports resolved, and ``from pkg import x`` counted as the submodule pkg.x when there is one."""
    found: set[str] = set()
    skipped = _type_checking_only(tree)
    package = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return {module for module in found if module in known and module != name}


def import_graph(root: Path, folders: tuple[str, ...]) -> dict[str, set[str]]:
    paths = {module_name(root, path): path for path in python_files(root, folders)}
    known = set(paths)
    return {name: imported_modules(name, path.name == "__init__.py", ast.parse(path.read_text()), known)
            for name, path in paths.items()}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        cycles.append(sorted(component))
    return cycles


def class_bases(root: Path, module: str, name: str, depth: int = 0) -> list[str] | None:
    """The bases (and keywords, e.g. a metaclass) of class ``name`` as module ``module`` exposes it, following
    ``from x import name`` re-exports; None when it cannot be found in the tree."""
    base = root.joinpath(*module.split("."))
    path = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
    if depth > 10 or not path.is_file():
        return None
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return [ast.unparse(item) for item in [*node.bases, *node.keywords]]
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    source = node.module or ""
                    if node.level:
                        anchor = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                        source = ".".join([*anchor[: len(anchor) - node.level + 1], *([source] if source else [])])
                    return class_bases(root, source, alias.name, depth + 1)
    return None


def parameter_counts(tree: ast.AST) -> Iterator[tuple[int, str, int]]:
    """(line, function name, parameters besides a leading self/cls) of every def; *args and **kwargs count one."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            arguments = node.args
            positional = [*arguments.posonlyargs, *arguments.args]
            count = len(positional) + len(arguments.kwonlyargs)
            count += (arguments.vararg is not None) + (arguments.kwarg is not None)
            if positional and positional[0].arg in ("self", "cls"):
                count -= 1
            yield node.lineno, node.name, count


def too_many_parameters(root: Path, folders: tuple[str, ...]) -> list[str]:
    return [f"{path.relative_to(root)}:{line} {name}() takes {count}"
            for path in python_files(root, folders)
            for line, name, count in parameter_counts(ast.parse(path.read_text()))
            if count > MAX_PARAMETERS]


def python_prose(source: str) -> Iterator[tuple[int, str]]:
    """(line, text) of every comment and docstring of a module."""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                yield body[0].lineno, body[0].value.value


def markdown_prose(text: str) -> Iterator[tuple[int, str]]:
    """(line, text) of every line outside fenced code blocks (those hold commands and data, not history)."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced:
            yield number, line


def history_references(root: Path, folders: tuple[str, ...], documents: tuple[str, ...]) -> list[str]:
    """Issue numbers and commit-hash-like tokens in the comments and docstrings of ``folders`` and in the prose of
    the markdown ``documents``."""
    found = []
    sources = [(path, python_prose(path.read_text())) for path in python_files(root, folders)]
    sources += [(root / name, markdown_prose((root / name).read_text())) for name in documents
                if (root / name).is_file()]
    for path, prose in sources:
        for line, text in prose:
            for pattern in (ISSUE_NUMBER, COMMIT_HASH):
                found += [f"{path.relative_to(root)}:{line + text.count(chr(10), 0, match.start())} {match.group()!r}"
                          for match in pattern.finditer(text)]
    return found
