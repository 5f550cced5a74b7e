"""Run the semantic mutants of tests/mutants/semantic.toml: each applied to a copy of the tree, its tests run there
with pytest, and a mutant they do not fail is a survivor. Exit status 1 on any survivor, on a mutant that no longer
applies (its text is not in the file exactly once) and on tests that did not run; 0 when every mutant is killed.

    python -m tests.support.semantic_mutants [NAME ...]
        (bash scripts/run semantic-mutants: the keyring and PostgreSQL the tests need are started there)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIST = ROOT / "tests" / "mutants" / "semantic.toml"
NOT_COPIED = shutil.ignore_patterns(".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache", ".hypothesis",
                                    "*.egg-info", ".mypy_cache")
KILLED = 1  # pytest: tests failed


@dataclass(frozen=True)
class Mutant:
    name: str
    promise: str
    file: str
    edits: list[list[str]]
    tests: list[str]
    also: dict[str, list[list[str]]] = field(default_factory=dict)  # other files, where a promise is kept twice

    def files(self) -> dict[str, list[list[str]]]:
        return {self.file: self.edits, **self.also}

    def apply(self, tree: Path) -> str | None:
        """Write the mutated files into ``tree``; the reason it cannot be applied, or None."""
        for name, edits in self.files().items():
            path = tree / name
            text = path.read_text()
            for find, replace in edits:
                if text.count(find) != 1:
                    return f"{find!r} occurs {text.count(find)} times in {name}, not once"
                text = text.replace(find, replace)
            path.write_text(text)
        return None


def mutants(names: list[str]) -> list[Mutant]:
    found = [Mutant(**entry) for entry in tomllib.loads(LIST.read_text())["mutant"]]
    return [mutant for mutant in found if not names or mutant.name in names]


def run(mutant: Mutant, tree: Path) -> tuple[str, float]:
    """'killed', 'SURVIVED', or why the mutant proved nothing; and the seconds its tests took."""
    originals = {name: (tree / name).read_text() for name in mutant.files()}
    started = time.monotonic()
    try:
        problem = mutant.apply(tree)
        if problem is not None:
            return f"NOT APPLIED: {problem}", 0.0
        env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
        done = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *mutant.tests],
                              cwd=tree, env=env, capture_output=True, text=True, timeout=600, check=False)
    finally:
        for name, text in originals.items():
            (tree / name).write_text(text)
    spent = time.monotonic() - started
    if done.returncode == KILLED:
        return "killed", spent
    if done.returncode == 0:
        return "SURVIVED", spent
    return f"TESTS DID NOT RUN (pytest exit {done.returncode}): {done.stdout[-300:]}", spent


def main(names: list[str]) -> int:
    chosen = mutants(names)
    failed = 0
    with tempfile.TemporaryDirectory(prefix="scratchvault-mutants-") as directory:
        tree = Path(directory) / "tree"
        shutil.copytree(ROOT, tree, ignore=NOT_COPIED)
        where = subprocess.run([sys.executable, "-c", "import keys, vault; print(keys.__file__, vault.__file__)"],
                               cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)}, capture_output=True,
                               text=True, check=True).stdout.split()
        if not all(Path(found).is_relative_to(tree) for found in where):
            print(f"the copy's tests would import the original tree ({where}): nothing to measure")
            return 1
        for mutant in chosen:
            outcome, spent = run(mutant, tree)
            failed += outcome != "killed"
            print(f"{outcome:<9} {spent:6.1f}s  {mutant.name} ({mutant.promise})", flush=True)
    print(f"{len(chosen) - failed} of {len(chosen)} semantic mutants killed")
    return 1 if failed or not chosen else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
