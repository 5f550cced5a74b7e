"""What doctor reports of a Citus coordinator: Citus's version and the workers, each worker's settings that matter
for durability and for copies of deleted rows (judged as for one server, durability.py), and for a vault in the
schema its tables' distribution, their placements by node, and whether every placement holds exactly what Citus
makes of the vault's tables (shards.py). Nothing without the citus extension."""

from __future__ import annotations

import json
from collections.abc import Sequence

import psycopg

from vault.errors import VaultError
from vault.storage.base import Finding
from vault.storage.postgres import shards
from vault.storage.postgres.citus import COORDINATOR_TABLES, OWNER_TABLES, SHARED_TABLES, has_citus
from vault.storage.postgres.connections import present
from vault.storage.postgres.durability import NODE_SETTINGS, durability
from vault.storage.postgres.schema import TABLES_SCHEMA

# the vault's shards and placements by node: (node, shards, placements not active)
BY_NODE = """
SELECT coalesce(n.nodename || ':' || n.nodeport, 'group ' || pl.groupid), count(*),
       count(*) FILTER (WHERE pl.shardstate <> 1 OR NOT coalesce(n.isactive, false))
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_dist_shard s ON s.logicalrelid = c.oid
JOIN pg_catalog.pg_dist_placement pl ON pl.shardid = s.shardid
LEFT JOIN pg_catalog.pg_dist_node n ON n.groupid = pl.groupid AND n.noderole = 'primary'
WHERE c.relnamespace = %(schema)s::regnamespace AND c.relname = ANY(%(tables)s::text[])
GROUP BY 1 ORDER BY 1
"""


def cluster(connection: psycopg.Connection) -> list[Finding]:
    """Findings about the Citus cluster the connection's server coordinates (none when it has no Citus)."""
    if not has_citus(connection):
        return []
    version = str(present(connection.execute("SELECT pg_catalog.citus_version()").fetchone())[0]).split(" on ")[0]
    workers = [f"{host}:{port}" for host, port in connection.execute(
        "SELECT node_name, node_port FROM pg_catalog.citus_get_active_worker_nodes() ORDER BY 1, 2")]
    inactive = [f"{host}:{port}" for host, port in connection.execute(
        "SELECT nodename, nodeport FROM pg_catalog.pg_dist_node WHERE noderole = 'primary' AND NOT isactive "
        "ORDER BY 1, 2")]
    found = [Finding("", f"{version}; active workers: {', '.join(workers) or 'none'}")]
    if inactive:
        found.append(Finding("FAIL", f"Citus nodes not active: {', '.join(inactive)}: the rows placed there can be "
                                     "neither read, deleted nor checked"))
    return found + _worker_settings(connection) + _vault_tables(connection)


def _worker_settings(connection: psycopg.Connection) -> list[Finding]:
    """Each active worker's durability and WAL copies: one ok line, or its FAIL and WARN lines."""
    found: list[Finding] = []
    for host, port, success, result in connection.execute(
            "SELECT nodename, nodeport, success, result FROM pg_catalog.run_command_on_workers(%s) ORDER BY 1, 2",
            [NODE_SETTINGS]):
        where = f"worker {host}:{port}"
        if not success:
            found.append(Finding("FAIL", f"{where} did not report its settings"))
            continue
        node = durability(json.loads(result))
        if all(finding.status == "ok" for finding in node):
            found.append(Finding("ok", f"{where}: {'; '.join(finding.text for finding in node)}"))
        else:
            found += [Finding(finding.status, f"{where}: {finding.text}") for finding in node if finding.status != "ok"]
    return found


def _vault_tables(connection: psycopg.Connection) -> list[Finding]:
    """The vault's tables: how each is distributed, where their placements are, and the placements' allowlist."""
    if present(connection.execute("SELECT to_regclass('scratchvault_schema')").fetchone())[0] is None:
        return []
    schema = str(present(connection.execute(TABLES_SCHEMA).fetchone())[0])
    parameters = {"schema": schema, "tables": list(OWNER_TABLES + SHARED_TABLES + COORDINATOR_TABLES)}
    distribution = _distribution(connection.execute(shards.DISTRIBUTION, parameters).fetchall())
    found = [Finding("", f"distribution: {distribution}"),
             Finding("", "placements: " + (", ".join(
                 f"{count:,} on {node}" + (f" ({idle:,} not active)" if idle else "")
                 for node, count, idle in connection.execute(BY_NODE, parameters)) or "none"))]
    try:
        problems = shards.problems(connection, schema)
    except VaultError as error:
        return [*found, Finding("FAIL", f"the vault's placements could not be checked: {error}")]
    if problems:
        return [*found, Finding("FAIL", f"the vault's tables on Citus are not as scratchvault placed them: "
                                        f"{'; '.join(problems)} (a shard's own trigger, rule, policy, index or "
                                        "constraint can keep or copy rows a delete removes)")]
    return [*found, Finding("ok", "the vault's tables are distributed as scratchvault distributes them, and every "
                                  "placement is active and holds exactly what Citus makes of its table")]


def _distribution(rows: Sequence[Sequence[object]]) -> str:
    """Each table's distribution, tables of one kind together: hash by its column in a colocation group, reference,
    or none."""
    kinds: dict[str, list[str]] = {}
    for name, method, model, group, column in rows:
        kind = (f"hash by {column} in colocation group {group}" if method == "h" else
                "reference" if (method, model) == ("n", "t") else "the coordinator's own" if method is None
                else f"partition method {method}, replication model {model}")
        kinds.setdefault(kind, []).append(str(name))
    return "; ".join(f"{kind}: {', '.join(names)}" for kind, names in kinds.items())
