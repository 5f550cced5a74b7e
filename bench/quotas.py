"""What per-owner quotas cost a put, and what the usage index buys (docs/operations.md, "Disk space and quotas").

``python -m bench.quotas [--rows N]`` fills three vaults with N rows (default 10,000) of one owner: one without
quotas, one with them, and one with them on a file whose index on (owner_tag, size_bytes) was dropped (so the
count reads every row, as it would without schema 4). It then times, interleaved in one process, 4 KiB puts of
that owner in each (each row deleted again, so the owner keeps N rows) and the usage count alone.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from contextlib import closing
from pathlib import Path
from typing import Any

from bench.run import OWNER, text_of
from keys.testing import MemoryKeyring
from vault import Vault

QUOTAS: dict[str, Any] = {"owner_max_rows": 10**9, "owner_max_bytes": 10**15}  # set, never reached


def filled(path: Path, rows: int, *, quotas: bool, drop_index: bool = False) -> Vault:
    """A vault at ``path`` holding ``rows`` small rows of OWNER (filled before the quotas are set: faster)."""
    with Vault.open(path, keyring_backend=(ring := MemoryKeyring())) as vault:
        for step in range(rows):
            vault.put(OWNER, "fill", step, "x", f"row {step}")
    vault = Vault.open(path, keyring_backend=ring, **(QUOTAS if quotas else {}))
    if drop_index:  # behind the open vault's back: opening would build it again
        with closing(sqlite3.connect(path)) as connection:
            connection.execute("DROP INDEX rows_owner_usage")
    return vault


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.quotas", description=__doc__)
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=300)
    args = parser.parse_args()
    text = text_of(4096)
    with tempfile.TemporaryDirectory() as directory:
        Path(directory).chmod(0o700)
        vaults = {"no quotas": filled(Path(directory) / "a.db", args.rows, quotas=False),
                  "quotas": filled(Path(directory) / "b.db", args.rows, quotas=True),
                  "quotas, no usage index": filled(Path(directory) / "c.db", args.rows, quotas=True,
                                                   drop_index=True)}
        puts: dict[str, list[float]] = {name: [] for name in vaults}
        counts: dict[str, list[float]] = {name: [] for name in vaults}
        for step in range(args.runs):
            for name, vault in vaults.items():
                owner_tag = vault._keys.index_key().owner_tag(OWNER.user_id)
                started = time.perf_counter()
                row = vault.put(OWNER, "t", step, "x", text)
                puts[name].append((time.perf_counter() - started) * 1000)
                vault.delete(OWNER, row.id)
                with vault._store.transaction() as tx:
                    started = time.perf_counter()
                    tx.owner_usage(owner_tag)
                    counts[name].append((time.perf_counter() - started) * 1000)
        print(f"owner with {args.rows:,} stored rows; medians of {args.runs} runs, interleaved")
        print("| vault | put 4 KiB ms | usage count ms |\n|---|---:|---:|")
        for name in vaults:
            print(f"| {name} | {statistics.median(puts[name]):.3f} | {statistics.median(counts[name]):.3f} |")
        for vault in vaults.values():
            vault.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
