"""``python -m bench.ledger [--against TREE]``: what the deletion ledgers (threat_model.md, "Rollback") cost.

Without ``--against``: medians of a 2,000-character read and of a listing of a 20-row turn whose owner has deleted
``--entries`` rows, each call made with the ledger check and with it switched off, interleaved, in one process.

With ``--against TREE`` (a tree of the code before ledgers, e.g. ``git archive 8c9bad0 | tar -x -C TREE``): the
same delete, extend_turn, read and listing run in two worker processes, one on this tree and one on TREE, asked
in turn one call at a time (the order swapped every round), so both meet the same machine; medians and their
ratio. Both use the in-memory keyring; a real keyring adds its own round trips (one read before each delete and
extend_turn, one write and its read-back after each delete).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess  # nosec B404
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

# The worker, run by ``python -c`` with its tree first on sys.path: prepares a vault, then times one call per line.
WORKER = r"""
import json, sys, tempfile, time
from pathlib import Path
from keys.testing import MemoryKeyring
from vault import Principal, Vault
owner, entries, rows = Principal("bench-ledger"), int(sys.argv[1]), int(sys.argv[2])
text = "".join(f"{i:06d} observation line with some words in it\n" for i in range(100))
scratch = tempfile.TemporaryDirectory(prefix="scratchvault-bench-")
vault = Vault.open(Path(scratch.name) / "v.db", keyring_backend=MemoryKeyring())
for row_id in [vault.put(owner, "old", step, "x", "x" * 512).id for step in range(entries)]:
    vault.delete(owner, row_id)  # the owner's ledger: this many entries
doomed = [vault.put(owner, "gone", step, "x", "x" * 512).id for step in range(int(sys.argv[3]))]
turn = [vault.put(owner, "t", step, "x", text).id for step in range(rows)]
ttl = [3600]
def extend():
    ttl[0] += 60
    vault.extend_turn(owner, "t", ttl[0])
calls = {"delete": lambda: vault.delete(owner, doomed.pop()), "extend_turn": extend,
         "read": lambda: vault.read(owner, turn[0], "head", n=2000), "list": lambda: vault.list_for_turn(owner, "t")}
print("ready", flush=True)
for line in sys.stdin:
    started = time.perf_counter()
    calls[line.strip()]()
    print(json.dumps(time.perf_counter() - started), flush=True)
vault.close()
"""


class Worker:
    """One tree's worker process."""

    def __init__(self, tree: Path, entries: int, rows: int, deletes: int) -> None:
        command = [sys.executable, "-c", WORKER, str(entries), str(rows), str(deletes)]  # no shell, our own text
        self.process = subprocess.Popen(command, cwd=tree, text=True,  # noqa: S603  # nosec B603
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        if self.process.stdin is None or self.process.stdout is None:  # both are pipes: never None
            raise RuntimeError(f"the worker on {tree} has no pipes")
        self._stdin, self._stdout = self.process.stdin, self.process.stdout
        if self._stdout.readline().strip() != "ready":
            raise RuntimeError(f"the worker on {tree} did not start")

    def time(self, call: str) -> float:
        self._stdin.write(call + "\n")
        self._stdin.flush()
        elapsed: float = json.loads(self._stdout.readline())
        return elapsed

    def close(self) -> None:
        self._stdin.close()
        self.process.wait(timeout=60)


def compare(this: Path, other: Path, entries: int, rows: int, runs: int) -> list[str]:
    """Interleaved medians (µs) of each call on both trees, and their ratio."""
    workers = [Worker(tree, entries, rows, runs) for tree in (this, other)]
    lines = [f"{'call':12s} {'this tree':>12s} {'against':>12s} {'ratio':>7s}"]
    try:
        for call in ("delete", "extend_turn", "read", "list"):
            samples: tuple[list[float], list[float]] = ([], [])
            for round_number in range(runs):
                order = (0, 1) if round_number % 2 == 0 else (1, 0)
                for which in order:
                    samples[which].append(workers[which].time(call))
            mine, theirs = (statistics.median(found) * 1e6 for found in samples)
            lines.append(f"{call:12s} {mine:10.1f}µs {theirs:10.1f}µs {mine / theirs:7.2f}")
    finally:
        for worker in workers:
            worker.close()
    return lines


def in_process(entries: int, rows: int, runs: int) -> list[str]:
    """Read and listing medians (µs) in one process, with the ledger check and with it switched off."""
    from keys.testing import MemoryKeyring
    from vault import Principal, Vault
    from vault.deletions import NO_LEDGER

    owner, found = Principal("bench-ledger"), {}
    with tempfile.TemporaryDirectory(prefix="scratchvault-bench-") as scratch, \
            Vault.open(Path(scratch) / "v.db", keyring_backend=MemoryKeyring()) as vault:
        for row_id in [vault.put(owner, "old", step, "x", "x" * 512).id for step in range(entries)]:
            vault.delete(owner, row_id)
        turn = [vault.put(owner, "t", step, "x", "x" * 4096).id for step in range(rows)]
        calls = {"read": lambda: vault.read(owner, turn[0], "head", n=2000),
                 "list": lambda: vault.list_for_turn(owner, "t")}
        named = vault._deletions.named
        for name, call in calls.items():
            checked, unchecked = [], []
            for _ in range(runs):
                checked.append(_timed(call))
                vault._deletions.named = lambda *_: NO_LEDGER  # type: ignore[method-assign]  # timed without it
                unchecked.append(_timed(call))
                vault._deletions.named = named  # type: ignore[method-assign]  # put back
            found[name] = (statistics.median(checked) * 1e6, statistics.median(unchecked) * 1e6)
    return [f"{name:5s} ledger checked {on:8.1f}µs, check off {off:8.1f}µs, +{on - off:.1f}µs ({on / off - 1:+.1%})"
            for name, (on, off) in found.items()]


def _timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ledger", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", type=Path, help="a tree of the code before ledgers, to compare with")
    parser.add_argument("--entries", type=int, default=200, help="rows the owner deleted before (ledger size)")
    parser.add_argument("--rows", type=int, default=20, help="rows in the turn extended and listed")
    parser.add_argument("--runs", type=int, default=201)
    args = parser.parse_args(argv)
    lines = (compare(Path.cwd(), args.against, args.entries, args.rows, args.runs) if args.against
             else in_process(args.entries, args.rows, args.runs))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
