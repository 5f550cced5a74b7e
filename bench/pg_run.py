"""``python -m bench --postgres URL``: the benchmark's cases with the vault over PostgreSQL against a plaintext table
on the same server (bench/pg_baseline.py), then the same cases on SQLite, so the two stores can be compared.

Each run makes two fresh schemas on the server the URL names (the vault's and the baseline's, same connection
settings) and drops them after; the in-memory keyring for every ratio, the real keyring measured apart, as the
SQLite benchmark does. Also absolute figures: a round trip, a 4 KiB put, a one-chunk read.
"""

from __future__ import annotations

import os
import secrets
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg import sql

from bench import report
from bench.pg_baseline import PlainPgStore
from bench.run import KIB, OWNER, SLICE, Bench, paired_medians_ms, real_keyring, sqlite_run, text_of
from keys.testing import MemoryKeyring
from vault import Vault
from vault.storage.postgres.store import PostgresStore

SETTINGS = ("server_version", "shared_buffers", "fsync", "synchronous_commit", "wal_level", "default_toast_compression")


def main(url: str, quick: bool, repeat: int, json_path: Path | None, plain_storage: str | None) -> int:
    """``repeat`` runs of both benchmarks in this process, then the tables of medians."""
    started = time.time()
    postgres: list[Bench] = []
    sqlite: list[Bench] = []
    absolutes: list[list[report.Row]] = []
    for _ in range(max(1, repeat)):
        with schemas(url, "vault", "plain") as (vault_url, plain_url):
            vault = Vault.open(vault_url, keyring_backend=MemoryKeyring(), max_read=SLICE)
            bench = Bench(vault, PlainPgStore(plain_url, plain_storage), quick)
            def absolute(bench: Bench = bench) -> None:
                absolutes.append(absolute_figures(bench))

            # after the listing: not at the start, where the last run's files and schemas are still being removed
            postgres.append(bench.run(started, (absolute,)))
        sqlite.append(sqlite_run(quick, started))
    rows = report.medians([bench.rows for bench in postgres])
    print(f"PostgreSQL: {server_settings(url)}; baseline content storage: {plain_storage or 'EXTENDED (default)'}\n")
    print(report.render(rows, report.medians([bench.memory for bench in postgres])))
    print("\nAbsolute figures on this connection (medians):\n")
    print(report.render(report.medians(absolutes), []))
    sqlite_rows = report.medians([bench.rows for bench in sqlite])
    print("\nThe vault and the baseline on each store (medians):\n")
    print(report.render_stores(rows, sqlite_rows))
    with schemas(url, "keyring") as (keyring_url,):
        for line in real_keyring(keyring_url):
            print("\n" + line)
    print(f"\n{'quick' if quick else 'full'} run x{len(postgres)} (medians), {time.time() - started:.0f} s, "
          f"{os.cpu_count()} cores")
    if json_path:
        report.write_json(json_path, rows, sqlite=sqlite_rows)
    return 0


def absolute_figures(bench: Bench) -> list[report.Row]:
    """On this connection: a round trip (``SELECT 1`` on the baseline's connection; the vault's: a snapshot's
    ``SELECT 1``, with its BEGIN and COMMIT), a 4 KiB put, and reads of a one-chunk row (a slice, and whole)."""
    text = text_of(4 * KIB)
    vault_id = bench.vault.put(OWNER, "absolute", 0, "x", text).id
    plain_id = bench.plain.put("absolute", 0, "x", text)
    store, plain = bench.vault._store, bench.plain  # the store itself: what one snapshot costs, nothing around it
    if not isinstance(store, PostgresStore) or not isinstance(plain, PlainPgStore):
        raise TypeError("the PostgreSQL figures need the PostgreSQL store and baseline")
    rows = [report.Row("round trip (SELECT 1)", *paired_medians_ms(plain.round_trip,
                                                                   lambda: store.query("SELECT 1"), 501), None)]
    plain_ms, vault_ms = paired_medians_ms(lambda: bench.plain.put("absolute", 1, "x", text),
                                           lambda: bench.vault.put(OWNER, "absolute", 1, "x", text), 101, settle=True)
    rows.append(report.Row("put 4 KiB text", plain_ms, vault_ms, None))
    rows.append(report.Row("slice of a one-chunk row (head 2,000 of 4 KiB)", *paired_medians_ms(
        lambda: bench.plain.read(plain_id, 0, SLICE), lambda: bench.vault.read(OWNER, vault_id, "head", n=SLICE), 501),
        None))
    rows.append(report.Row("one-chunk row, whole (4 KiB)", *paired_medians_ms(
        lambda: bench.plain.get(plain_id), lambda: bench.vault.get(OWNER, vault_id), 501), None))
    return rows


@contextmanager
def schemas(url: str, *names: str) -> Iterator[tuple[str, ...]]:
    """Fresh schemas on the server, one per name, as URLs whose search_path is that schema; dropped after."""
    made = [f"bench_{name}_{secrets.token_hex(4)}" for name in names]
    with psycopg.connect(url, autocommit=True) as connection:
        for schema in made:
            connection.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    try:
        yield tuple(with_search_path(url, schema) for schema in made)
    finally:
        with psycopg.connect(url, autocommit=True) as connection:
            for schema in made:
                connection.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def with_search_path(url: str, schema: str) -> str:
    """``url`` with ``-csearch_path=schema`` added to its options (the rest of the URL as it was)."""
    base, _, query = url.partition("?")
    pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
    options = " ".join([value for key, value in pairs if key == "options"] + [f"-csearch_path={schema}"])
    pairs = [(key, value) for key, value in pairs if key != "options"] + [("options", options)]
    return f"{base}?{urllib.parse.urlencode(pairs, quote_via=urllib.parse.quote)}"


def server_settings(url: str) -> str:
    """The server settings that bear on the figures."""
    with psycopg.connect(url, autocommit=True) as connection:
        found = connection.execute("SELECT name, setting, unit FROM pg_settings WHERE name = ANY(%s) ORDER BY name",
                                   (list(SETTINGS),)).fetchall()
        citus = connection.execute("SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'citus'").fetchone()
        workers = (connection.execute("SELECT count(*) FROM citus_get_active_worker_nodes()").fetchone()
                   if citus else None)
    shown = ", ".join(f"{name} {setting}{'' if unit is None else ' x ' + unit}" for name, setting, unit in found)
    return shown if citus is None else f"{shown}; a Citus {citus[0]} coordinator with {workers and workers[0]} workers"
