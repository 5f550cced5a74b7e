"""``python -m bench --load --postgres URL [--seconds N] [--locks]``: the load run of bench/load.py (8 processes x 2
threads, the same mix and keys) on SQLite and on one PostgreSQL database, side by side: first with one owner per
thread (16; writers of different owners never wait for each other on PostgreSQL), then with 2 owners (8 writers
of each queue for their owner's lock). Each run gets a new SQLite file, or a new schema on the server the URL
names (dropped after); the runs alternate stores so both meet the same machine. ``--locks`` traces SQLite's write
lock; on PostgreSQL the server's sessions are sampled (bench/pg_waits.py).
"""

from __future__ import annotations

import os
import sys

import psycopg

from bench import load
from bench.cpu import parent_of
from bench.load_report import LoadResult, render_side_by_side
from bench.pg_run import schemas, server_settings
from bench.pg_waits import WaitSampler

# owners of a run, and PostgreSQL's ops/s over SQLite's it should reach (None: no target)
OWNER_COUNTS = ((16, 3.0), (2, None))
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


def run_postgres(url: str, plan: load.LoadPlan) -> tuple[LoadResult, WaitSampler]:
    """The load in a new schema on the server (dropped after), the server's sessions sampled meanwhile, and its
    processes' CPU measured when it runs on this machine."""
    with schemas(url, "load") as (location,):
        sampler = WaitSampler(location)
        with sampler:
            return load.run(location, plan, server_root(url)), sampler


def server_root(url: str) -> int | None:
    """The postmaster's process id when the server at ``url`` runs on this machine (reached over a Unix socket or
    the loopback), else None."""
    with psycopg.connect(url, autocommit=True) as connection:
        local = connection.info.host.startswith("/") or connection.info.host in LOCAL_HOSTS
        row = connection.execute("SELECT pg_backend_pid()").fetchone()
    return None if row is None or not local else parent_of(row[0])


def main(url: str, seconds: float, trace: bool = False) -> int:
    """Both owner counts on both stores; exit 1 only if an error escaped that is not a VaultError."""
    escaped = False
    print(f"PostgreSQL: {server_settings(url)}")
    for count, target in OWNER_COUNTS:
        plan = load.LoadPlan(seconds, owners=count, trace=trace)
        print(f"load: {plan.processes} processes x {plan.threads} threads, {count} owners, {seconds:g} s each "
              f"store, mix {load.MIX}", file=sys.stderr)
        sqlite = load.run_sqlite(plan)
        postgres, sampler = run_postgres(url, plan)
        print(f"\n## {count} owners ({plan.processes} processes x {plan.threads} threads)\n")
        print(render_side_by_side(sqlite, postgres, target))
        print(sampler.render())
        if sqlite.locks:
            print("\nSQLite write lock:\n\n" + load.locktrace.render(sqlite.locks))
        escaped = escaped or sqlite.escaped() or postgres.escaped()
    print(f"\nload runs of {seconds:g} s each, {os.cpu_count()} cores")
    return 1 if escaped else 0
