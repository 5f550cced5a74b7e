"""Nothing a caller gives the vault reaches any Citus node's files in the clear: with the vault sharded over the
workers, after puts (text, JSON, streamed), extends, a key rotation, a rewrap and a retirement, and a CHECKPOINT on
every node, no file of any node's data directory (table files and pg_wal among them) holds a content canary, a
summary canary, or the user id, actor, channel, turn or executor name, as UTF-8, UTF-16, hex or Base64.

Canaries planted in plaintext in a reference table (a copy on every node) must be found on every node, in its
table files and its WAL, or the scan proves nothing."""

from __future__ import annotations

import base64
import io

import psycopg
from psycopg import sql

from keys import CHUNK_BYTES
from keys.testing import MemoryKeyring
from tests.support.canary_scan import Canaries
from tests.support.citus import CitusCluster, scratch_schema
from tests.support.citus_files import BASE64, checkpoint, scan_nodes
from tests.support.citus_placement import require_owner_tables_distributed
from vault import Principal, Vault

FILLER = "ordinary words of a fetched page " * 300
PLANTED = {"plantedtext": "utf-8", "plantedbase64": BASE64}


def _write_everything(vault: Vault, canaries: Canaries) -> None:
    """Each write path, with canaries in every name a caller passes and in what the summaries keep."""
    who = Principal(canaries.new("user"), actor=canaries.new("actor"), channel=canaries.new("channel"))
    turn, executor = canaries.new("turn"), canaries.new("executor")
    text = canaries.new("sumtxt") + " begins this page " + FILLER + canaries.new("content") + FILLER
    stream = (canaries.new("sumstr") + " " + "s" * (CHUNK_BYTES - 60) + canaries.new("acrosschunks")
              + "t" * CHUNK_BYTES + canaries.new("streamed"))
    page = vault.put(who, turn, 1, executor, text)
    assert canaries.made["sumtxt"] in page.summary
    vault.put(who, turn, 2, executor, {canaries.new("sumkey"): [canaries.new("jsonvalue")] * 20})
    streamed = vault.put(who, turn, 3, executor, io.StringIO(stream))
    assert canaries.made["sumstr"] in streamed.summary and vault.get(who, streamed.id).content == stream
    assert len(vault.list_for_turn(who, turn)) == 3
    vault.extend(who, page.id, 7200)
    vault.extend_turn(who, turn, 9000)
    assert vault.rotate_owner_key(who.user_id) == 2
    assert vault.rewrap(who.user_id) == 3
    assert vault.retire_old_key_versions(who.user_id) == 1
    assert vault.get(who, page.id).content == text


def _plant(admin: psycopg.Connection, schema: str, canaries: Canaries) -> None:
    """Plaintext canaries in a reference table: Citus copies it to every node, so each node's files hold them.
    Each is inserted three times, one WAL record each: one record may be split by a WAL page header."""
    table = sql.Identifier(schema, "planted")
    admin.execute(sql.SQL("CREATE TABLE {} (note text)").format(table))
    admin.execute("SELECT create_reference_table(%s)", [f"{schema}.planted"])
    encoded = base64.b64encode(b"a preamble " + canaries.new("plantedbase64").encode() + b" and more").decode()
    text = canaries.new("plantedtext")
    for _ in range(3):
        admin.execute(sql.SQL("INSERT INTO {} VALUES (%s), (%s)").format(table), [text, encoded])


def test_no_node_keeps_content_summaries_or_names_in_its_files(citus_cluster: CitusCluster,
                                                               citus_admin: psycopg.Connection,
                                                               citus_schema: str) -> None:
    data_dirs, _ = citus_cluster.files()
    canaries = Canaries()
    with Vault.open(citus_cluster.url(schema=citus_schema), keyring_backend=MemoryKeyring()) as vault:
        require_owner_tables_distributed(citus_admin, citus_schema)
        _write_everything(vault, canaries)
    with scratch_schema(citus_admin) as planted_schema:
        _plant(citus_admin, planted_schema, canaries)
        checkpoint(citus_cluster.node_urls)
        by_node = scan_nodes(canaries, data_dirs)
    for node, found in by_node.items():
        for name, form in PLANTED.items():
            where = found.pop(f"{name} as {form}", set())
            assert any(path.startswith("base/") for path in where), f"{node}: the scan missed {name} in its tables"
            assert any(path.startswith("pg_wal/") for path in where), f"{node}: the scan missed {name} in its WAL"
    assert {node: found for node, found in by_node.items() if found} == {}, "canaries on a node's disk"
