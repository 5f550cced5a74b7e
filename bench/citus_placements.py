"""What the placement check costs an open on Citus.

``python -m bench.citus_placements URL [--runs N]`` makes a vault at ``URL`` (a Citus coordinator, logging in as
the role that owns an empty schema, first on the URL's search_path: the first open distributes the 8 owner tables
over 32 shards each and makes the 5 shared tables reference tables; its keys are in memory), then times,
alternating, N calls of the placement check alone (in a transaction of its own, as the open runs it) and N whole
``Vault.open`` calls, which include it, and prints the median and the quartiles of each in ms, with the number of
placements checked (docs/decisions.md, "Sharding over Citus").
"""

from __future__ import annotations

import argparse
import statistics
import time

import psycopg

from keys.testing import MemoryKeyring
from vault import Vault
from vault.storage.postgres import shards
from vault.storage.postgres.citus import OWNER_TABLES, SHARED_TABLES
from vault.storage.postgres.schema import TABLES_SCHEMA


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="a Citus coordinator, as the owner of the vault's schema")
    parser.add_argument("--runs", type=int, default=20)
    arguments = parser.parse_args()
    keyring = MemoryKeyring()
    Vault.open(arguments.url, keyring_backend=keyring).close()
    check_ms: list[float] = []
    open_ms: list[float] = []
    with psycopg.connect(arguments.url) as connection:
        schema = str(connection.execute(TABLES_SCHEMA).fetchone()[0])  # type: ignore[index]
        placements = len(connection.execute(shards.PLACEMENTS, {"schema": schema, "tables": list(
            OWNER_TABLES + SHARED_TABLES)}).fetchall())
        connection.commit()
        for _ in range(arguments.runs):
            started = time.perf_counter()
            with connection.transaction():
                shards.check_placements(connection, schema)
            check_ms.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            Vault.open(arguments.url, keyring_backend=keyring).close()
            open_ms.append((time.perf_counter() - started) * 1000)
    print(f"{placements} placements over {arguments.runs} runs")
    for name, times in (("placement check", check_ms), ("Vault.open", open_ms)):
        low, median, high = statistics.quantiles(times, n=4)
        print(f"{name}: median {median:.1f} ms (quartiles {low:.1f}, {high:.1f})")


if __name__ == "__main__":
    main()
