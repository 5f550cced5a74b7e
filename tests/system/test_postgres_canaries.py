"""A canary scan of the PostgreSQL cluster's files: what the vault stores reaches the server's tables and WAL only
encrypted. Rows whose content, summary (a JSON object's keys, a text's first characters), user id, turn id and
executor name hold random canaries are put; after a CHECKPOINT every file under the cluster's data directory
(base/, where the tables are, and pg_wal, among the rest) is read raw and none may hold a canary, as text or as
hex (bytea's text form). A canary planted in plaintext by the superuser in the same run must be found, in a table
file and in the WAL, or the scan proves nothing.
"""

from __future__ import annotations

import mmap
import os
import secrets
from pathlib import Path

import pytest

from keys.testing import MemoryKeyring
from tests.system.pg_hosts import admin
from vault import Principal, Vault

pytestmark = pytest.mark.postgres
CHUNK = 64 * 1024


def data_directory(url: str) -> Path:
    """The test server's data directory: SCRATCHVAULT_TEST_PGDATA, else the one the server reports."""
    named = os.environ.get("SCRATCHVAULT_TEST_PGDATA")
    if not named:
        with admin(url) as connection:
            named = connection.execute("SHOW data_directory").fetchone()[0]
    path = Path(named)
    if not (path / "base").is_dir():
        pytest.fail(f"the server's data directory {path} is not readable here")
    return path


def scan(root: Path, needles: dict[str, bytes]) -> tuple[dict[str, set[str]], set[str]]:
    """For each needle, the files under ``root`` whose raw bytes hold it; and every file read (relative paths). A
    file removed while the scan runs (a recycled WAL segment, a temporary file) is skipped."""
    found: dict[str, set[str]] = {name: set() for name in needles}
    scanned: set[str] = set()
    for directory, _, files in os.walk(root):
        for name in files:
            path = Path(directory, name)
            try:
                with path.open("rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as raw:
                    for needle, value in needles.items():
                        if raw.find(value) != -1:
                            found[needle].add(str(path.relative_to(root)))
            except (FileNotFoundError, ValueError):  # gone, or empty (an empty file holds nothing)
                continue
            scanned.add(str(path.relative_to(root)))
    return found, scanned


def test_no_content_summary_or_user_id_reaches_the_clusters_files_in_plaintext(pg_schemas):
    url = pg_schemas("canaries")
    canary = {what: f"CANARY{what.upper()}{secrets.token_hex(8)}" for what in
              ("text", "big", "json_key", "json_value", "bytes", "user", "turn", "executor", "planted")}
    who = Principal(canary["user"], actor="planner", channel="web")
    with Vault.open(url, keyring_backend=MemoryKeyring()) as vault:
        big = ("x" * (CHUNK - 10) + canary["big"] + "y" * CHUNK + canary["big"])
        vault.put(who, canary["turn"], 1, canary["executor"], f"{canary['text']} begins this text", ttl_seconds=600)
        vault.put(who, canary["turn"], 2, canary["executor"], big, ttl_seconds=600)
        vault.put(who, canary["turn"], 3, canary["executor"], {canary["json_key"]: [canary["json_value"]] * 40},
                  ttl_seconds=600)
        vault.put(who, canary["turn"], 4, canary["executor"], b"\0" + canary["bytes"].encode(), ttl_seconds=600)
        summaries = " ".join(rep.summary for rep in vault.list_for_turn(who, canary["turn"]))
        assert canary["text"] in summaries and canary["json_key"] in summaries  # the summaries bear canaries too
    with admin(url) as connection:
        connection.execute("CREATE TABLE planted (note text)")
        connection.execute("INSERT INTO planted VALUES (%s)", (canary["planted"],))
        connection.execute("CHECKPOINT")
        tables = {name: connection.execute("SELECT pg_relation_filepath(%s)", (name,)).fetchone()[0]
                  for name in ("rows", "summaries", "chunks", "owners", "planted")}
    needles = {f"{what} as {form}": value.encode().hex().encode() if form == "hex" else value.encode()
               for what, value in canary.items() for form in ("text", "hex")}
    found, scanned = scan(data_directory(url), needles)
    assert set(tables.values()) <= scanned, "the vault's table files were not among those scanned"
    assert any(path.startswith("pg_wal/") for path in scanned)
    planted = found.pop("planted as text")
    assert tables["planted"] in planted, "the scan missed a plaintext canary in its table's file"
    assert any(path.startswith("pg_wal/") for path in planted), "the scan missed a plaintext canary in the WAL"
    assert {needle: files for needle, files in found.items() if files and needle != "planted as hex"} == {}
