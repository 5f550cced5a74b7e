"""Mutation testing of keys/ with mutmut ([tool.mutmut] in pyproject.toml): run it one group of modules at a time,
then report the score of each group and every survivor tests/mutants/equivalent.toml does not explain.

    python -m tests.support.mutation_testing run [GROUP ...]   mutmut over the groups (all when none), then report
    python -m tests.support.mutation_testing report [GROUP ...] the report of what mutmut has recorded in mutants/

A survivor is a mutant the tests did not fail, or one no test reaches ("no tests"). It is explained only by an entry
of the equivalents file naming the mutant and the line it writes, with the reason the change cannot be observed; an
entry whose mutant no longer survives, or whose line no longer matches, is stale and fails the report too. Exit
status 1 on an unexplained survivor, a stale entry or a mutant of a requested group left unchecked; 0 otherwise.
"""

from __future__ import annotations

import fnmatch
import os
import subprocess
import sys
import tomllib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EQUIVALENTS = ROOT / "tests" / "mutants" / "equivalent.toml"
MUTMUT = str(Path(sys.executable).parent / "mutmut")  # its script: "python -m mutmut" runs its module twice
# mutmut names a mutant "<module>.<function>__mutmut_<n>" (a method: "<module>.xǁ<Class>ǁ<method>__mutmut_<n>")
GROUPS: dict[str, tuple[str, ...]] = {
    "crypto": ("keys.crypto.*",),
    "formats": ("keys.formats.*",),
    "keyring": ("keys.keyring.*",),
    "epochs": ("keys.epochs.*",),
    "top": ("keys.manager.*", "keys.owner_keyset.*", "keys.ledger.*", "keys.commitments.*", "keys.recipe.*",
            "keys.blind_index.*", "keys.turn_summaries.*"),
}
KILLED = {1, 3, 37}  # tests failed, pytest's internal error, the type checker
TIMED_OUT = {36, -24, 24, 152, 255}  # a mutant that hangs the tests is caught by them
SURVIVED = {0: "survived", 5: "no tests", 33: "no tests"}


@dataclass(frozen=True)
class Equivalent:
    mutant: str
    change: str  # the line the mutant writes, as mutmut's diff shows it after "+", stripped
    why: str


def group_of(mutant: str) -> str | None:
    for name, patterns in GROUPS.items():
        if any(fnmatch.fnmatchcase(mutant, pattern) for pattern in patterns):
            return name
    return None


def recorded_results() -> dict[str, int | None]:
    """Every mutant mutmut has generated under mutants/, with its exit code (None: not checked yet)."""
    import json

    results: dict[str, int | None] = {}
    for meta in sorted((ROOT / "mutants" / "keys").rglob("*.py.meta")):
        results.update(json.loads(meta.read_text())["exit_code_by_key"])
    return results


def equivalents() -> dict[str, Equivalent]:
    entries = tomllib.loads(EQUIVALENTS.read_text()).get("mutant", [])
    return {entry["mutant"]: Equivalent(entry["mutant"], entry["change"].strip(), entry["why"]) for entry in entries}


def changed_lines(mutant: str) -> list[str]:
    """The lines the mutant writes, from mutmut's own diff of it against the original function."""
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    diff = get_diff_for_mutant(mutant)
    return [line[1:].strip() for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]


def show(mutant: str) -> str:
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    return "\n".join("      " + line for line in get_diff_for_mutant(mutant).splitlines()[2:])


def report(groups: list[str]) -> int:
    os.chdir(ROOT)  # mutmut reads its config and mutants/ from the working directory
    results = {name: code for name, code in recorded_results().items() if group_of(name) in groups}
    listed = equivalents()
    unexplained: list[str] = []
    # an entry is stale when its mutant is gone or caught now (one not checked yet is reported as unchecked)
    stale = [name for name in listed if group_of(name) in groups
             and (name not in results or results[name] in KILLED | TIMED_OUT)]
    print("group     mutants  killed  timed out  equivalent  unexplained  unchecked")
    for group in groups:
        counts: Counter[str] = Counter()
        for name, code in results.items():
            if group_of(name) != group:
                continue
            if code is None:
                counts["unchecked"] += 1
            elif code in KILLED:
                counts["killed"] += 1
            elif code in TIMED_OUT:
                counts["timed out"] += 1
            elif name in listed and listed[name].change in changed_lines(name):
                counts["equivalent"] += 1
            else:
                counts["unexplained"] += 1
                stale += [name] if name in listed else []
                unexplained.append(name)
        total = sum(counts.values())
        print(f"{group:<9} {total:>7}  {counts['killed']:>6}  {counts['timed out']:>9}  {counts['equivalent']:>10}"
              f"  {counts['unexplained']:>11}  {counts['unchecked']:>9}")
        if counts["unchecked"]:
            unexplained.append(f"{counts['unchecked']} mutants of {group} not checked")
    for name in sorted(n for n in unexplained if n in results):
        print(f"\n  {SURVIVED.get(results[name] or 0, 'suspicious')}: {name}\n{show(name)}")
    for name in sorted(set(stale)):
        print(f"\n  stale entry in {EQUIVALENTS.relative_to(ROOT)}: {name} (killed now, gone, or its line changed)")
    for line in (n for n in unexplained if n not in results):
        print(f"\n  {line}")
    return 1 if unexplained or stale else 0


def run(groups: list[str], max_children: int) -> int:
    # the unit tests first: a mutant they catch stops its run before the slower tests (pytest's own variable, so
    # mutmut's recorded results, which depend on its configured pytest arguments, stay valid)
    addopts = f"{os.environ.get('PYTEST_ADDOPTS', '')} -p tests.support.unit_tests_first".strip()
    for group in groups:
        print(f"==> mutmut: {group} ({', '.join(GROUPS[group])})", flush=True)
        subprocess.run([MUTMUT, "run", "--max-children", str(max_children),
                        *GROUPS[group]], cwd=ROOT, check=True, env={**os.environ, "PYTEST_ADDOPTS": addopts})
    return report(groups)


def main(argv: list[str]) -> int:
    command, *names = argv or ["run"]
    unknown = [name for name in names if name not in GROUPS]
    if command not in {"run", "report"} or unknown:
        print(f"usage: python -m tests.support.mutation_testing run|report [{'|'.join(GROUPS)} ...]"
              + (f"\nunknown group: {', '.join(unknown)}" if unknown else ""), file=sys.stderr)
        return 2
    groups = names or list(GROUPS)
    if command == "report":
        return report(groups)
    return run(groups, int(os.environ.get("MUTANTS_MAX_CHILDREN") or os.cpu_count() or 2))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
