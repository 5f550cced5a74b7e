"""The vault's tables on a Citus cluster: distributed as the vault distributed them, and each placement of a shard
carrying exactly what Citus makes of the coordinator's table.

On Citus the coordinator's tables are shells: the rows live in shards, ``<table>_<shardid>``, on the workers (and
in the coordinator's own copy of each reference table), and each worker keeps a copy of the shells (metadata sync).
A role that reaches a worker can plant a trigger, rule, policy, index or foreign key on a shard there, where the
coordinator's allowlist (catalog.py) does not look, and keep or copy the rows a delete removes. So every placement
is described where it lives, by the catalog query the allowlist uses (``catalog.OBJECTS``), and must equal the
coordinator's allowlist for its table with Citus's names: the table and each constraint and index named with the
suffix ``_<shardid>`` (``rows_pkey_102137`` on ``rows_102137``), and no trigger. A worker's shells may hold what the
coordinator's may, Citus's truncate trigger included. The distribution itself is checked too:
each owner table hash-distributed by ``owner_tag`` in one colocation group, each shared table a reference table,
every shard placed, every placement active on an active primary node.

The workers are asked with ``run_command_on_workers`` (one query per worker naming every placement; Citus lets any
role run it, and the connections it opens see shards), the coordinator's own placements in the caller's session
with ``citus.show_shards_for_app_name_prefixes`` set for the query. A worker's session is not the caller's
transaction: a placement the caller's transaction made (a first open distributing the tables) is invisible to it
and left out, as no other session can see, let alone alter, it before it commits. Messages name tables, kinds of
object and shard counts, never a definition's text (threat_model.md, "What the database cannot move").
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import NamedTuple

import psycopg

from vault.errors import IntegrityError, StorageError
from vault.storage.postgres.catalog import EXPECTED, OBJECTS, Described
from vault.storage.postgres.citus import DISTRIBUTION_COLUMN, OWNER_TABLES, SHARED_TABLES
from vault.storage.postgres.connections import present

SHOWN = "citus.show_shards_for_app_name_prefixes"  # Citus hides shards from catalog queries unless this matches
COORDINATOR_GROUP = 0
Problem = tuple[str, str, str, str]  # (table, what was found, on what kind of place, which place)
_INDEX = re.compile(r"(CREATE (?:UNIQUE )?INDEX )(\S+) ON (\S+) USING ")

# each table of ``%(tables)s`` in ``%(schema)s``: (name, partition method, replication model, colocation group,
# distribution column); NULLs for one that is not distributed
DISTRIBUTION = """
SELECT t.name, p.partmethod::text, p.repmodel::text, p.colocationid,
       CASE WHEN p.partmethod = 'h' THEN pg_catalog.column_to_column_name(p.logicalrelid, p.partkey) END
FROM unnest(%(tables)s::text[]) WITH ORDINALITY AS t(name, position)
LEFT JOIN pg_catalog.pg_class c ON c.relname = t.name AND c.relnamespace = %(schema)s::regnamespace
LEFT JOIN pg_catalog.pg_dist_partition p ON p.logicalrelid = c.oid
ORDER BY t.position
"""
# every shard of those tables and its placements: (table, shard id, group, usable, made by this transaction).
# Usable: shard state 1 on an active primary. Made here: its placement row's xmin is one of this transaction's ids,
# told by being at or after its top-level id (modulo 2^32) and still in progress.
PLACEMENTS = """
WITH mine AS (SELECT pg_catalog.pg_current_xact_id_if_assigned()::text::bigint AS top)
SELECT c.relname::text, s.shardid, pl.groupid,
       coalesce(pl.shardstate = 1 AND n.isactive, false),
       CASE WHEN mine.top IS NULL OR pl.placementid IS NULL OR after.xids >= 2147483648 THEN false
            ELSE pg_catalog.pg_xact_status((mine.top + after.xids)::text::xid8) = 'in progress' END
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_dist_shard s ON s.logicalrelid = c.oid
LEFT JOIN pg_catalog.pg_dist_placement pl ON pl.shardid = s.shardid
LEFT JOIN pg_catalog.pg_dist_node n ON n.groupid = pl.groupid AND n.noderole = 'primary'
CROSS JOIN mine
CROSS JOIN LATERAL (SELECT (pl.xmin::text::bigint - mine.top %% 4294967296 + 4294967296) %% 4294967296 AS xids) after
WHERE c.relnamespace = %(schema)s::regnamespace AND c.relname = ANY(%(tables)s::text[])
ORDER BY s.shardid, pl.groupid
"""
# what a worker is asked: every object on the named relations, as one JSON array of [name, kind, text]
REMOTE = "".join(("SELECT coalesce(json_agg(json_build_array(d.name, d.kind, d.text)), '[]')::text FROM (",
                  OBJECTS, ") AS d(name, kind, text)"))


class Placement(NamedTuple):
    """One placement of a shard (``group`` None: the shard has none)."""

    table: str
    shard: int
    group: int | None
    usable: bool
    made_here: bool

    @property
    def name(self) -> str:
        """The shard's table, as Citus names it (the vault's names are short enough never to be truncated)."""
        return f"{self.table}_{self.shard}"


def check_placements(connection: psycopg.Connection, schema: str) -> None:
    """IntegrityError unless the vault's tables in ``schema`` (quoted) are distributed as the vault distributes them
    and every placement of their shards is exactly what Citus makes of them."""
    found = problems(connection, schema)
    if found:
        raise IntegrityError(f"the Citus workers hold the vault's tables otherwise than scratchvault placed them "
                             f"({'; '.join(found)}): a shard's own trigger, rule, policy, index or constraint can "
                             "keep or copy rows a delete removes; refusing it. Drop what was added after checking "
                             "what it did, or restore the database from backup")


def problems(connection: psycopg.Connection, schema: str) -> list[str]:
    """What is not as the vault made it, one line per finding and table with the number of shards or workers'
    shells it was found on, sorted (empty: all is)."""
    tables = list(OWNER_TABLES + SHARED_TABLES)
    found = _distribution(connection.execute(DISTRIBUTION, {"schema": schema, "tables": tables}).fetchall())
    placements = [Placement(*row) for row in connection.execute(PLACEMENTS, {"schema": schema, "tables": tables})]
    found += [(p.table, "no placement", "shard", p.name) if p.group is None
              else (p.table, "not active", "placement", f"{p.name} in group {p.group}")
              for p in placements if p.group is None or not p.usable]
    checked = [p for p in placements if p.group is not None and p.usable and not p.made_here]
    described = _described(connection, schema, checked)
    held_by: dict[tuple[int | None, str], set[Described]] = {}
    for group, lines in described.items():
        for line in lines:
            held_by.setdefault((group, line[0]), set()).add(line)
    for placement in checked:
        held = held_by.get((placement.group, placement.name), set())
        if not held:  # the shard's table itself is gone (or hidden from Citus's own sessions)
            found.append((placement.table, "table missing", "shard", placement.name))
            continue
        expected = shard_objects(placement.table, placement.shard)
        found += [(placement.table, f"{kind} added", "shard", placement.name) for _, kind, _ in held - expected]
        found += [(placement.table, f"{kind} missing", "shard", placement.name) for _, kind, _ in expected - held]
    for group, lines in described.items():
        found += [(table, f"{kind} added", "worker shell", f"group {group}") for table, kind, text in lines
                  if table in tables and (table, kind, text) not in EXPECTED]
    places = Counter((table, what, where) for table, what, where, _ in set(found))  # where each was found
    return [f"{what} on {table}" + (f" ({count} {where}{'s' if count > 1 else ''})" if where else "")
            for (table, what, where), count in sorted(places.items())]


def shard_objects(table: str, shard: int) -> set[Described]:
    """What the allowlist expects of ``table``, as Citus makes it on shard ``shard``: the table, its constraints
    and its indexes named with the suffix ``_<shard>``; a shard carries no trigger."""
    suffix = f"_{shard}"
    made: set[Described] = set()
    for name, kind, text in EXPECTED:
        if name != table or kind == "trigger":
            continue
        if kind == "constraint":
            constraint, definition = text.split(" ", 1)
            text = f"{constraint}{suffix} {definition}"
        elif kind == "index":
            text = _INDEX.sub(lambda match: f"{match[1]}{match[2]}{suffix} ON {match[3]}{suffix} USING ", text, 1)
        made.add((table + suffix, kind, text))
    return made


def _distribution(rows: list[tuple]) -> list[Problem]:
    """Each owner table hash-distributed by owner_tag, all in the colocation group of the first; each shared table
    a reference table (partition method n, replication model t)."""
    found: list[Problem] = []
    by_table = {str(name): (method, model, group, column) for name, method, model, group, column in rows}
    groups = {by_table[table][2] for table in OWNER_TABLES}
    for table in OWNER_TABLES:
        method, _, group, column = by_table[table]
        if method != "h" or column != DISTRIBUTION_COLUMN:
            found.append((table, f"no distribution by {DISTRIBUTION_COLUMN}", "", ""))
        elif len(groups) > 1 and group != by_table[OWNER_TABLES[0]][2]:
            found.append((table, f"no colocation with {OWNER_TABLES[0]}", "", ""))
    found += [(table, "no reference table", "", "") for table in SHARED_TABLES if by_table[table][:2] != ("n", "t")]
    return found


def _described(connection: psycopg.Connection, schema: str, placements: list[Placement]) -> dict[int, set[Described]]:
    """Every object on the vault's shells and on ``placements``, by the group of the node that holds it: the
    workers' through ``run_command_on_workers``, the coordinator's in this session."""
    names = list(OWNER_TABLES + SHARED_TABLES) + sorted({p.name for p in placements})
    command = psycopg.ClientCursor(connection).mogrify(REMOTE, {"schema": schema, "tables": names})
    groups = {(str(host), int(port)): int(group) for host, port, group in connection.execute(
        "SELECT nodename, nodeport, groupid FROM pg_catalog.pg_dist_node WHERE noderole = 'primary'")}
    described: dict[int, set[Described]] = {}
    for host, port, success, result in connection.execute(
            "SELECT nodename, nodeport, success, result FROM pg_catalog.run_command_on_workers(%s)", [command]):
        group = groups.get((str(host), int(port)))
        if not success or group is None:
            raise StorageError(f"the Citus worker {host}:{port} did not describe the vault's shards; the check that "
                               "nothing was planted on them cannot run")
        if group != COORDINATOR_GROUP:
            described[group] = {(str(n), str(k), str(t)) for n, k, t in json.loads(result)}
    local = [p.name for p in placements if p.group == COORDINATOR_GROUP]
    if local:
        described[COORDINATOR_GROUP] = _described_here(connection, schema, local)
    return described


def _described_here(connection: psycopg.Connection, schema: str, names: list[str]) -> set[Described]:
    """The objects on the coordinator's own placements ``names``, shown for this query only."""
    with connection.transaction():
        prior = present(connection.execute("SELECT current_setting(%s)", [SHOWN]).fetchone())[0]
        connection.execute("SELECT set_config(%s, '*', true)", [SHOWN])
        rows = connection.execute(OBJECTS, {"schema": schema, "tables": names}).fetchall()
        connection.execute("SELECT set_config(%s, %s, true)", [SHOWN, prior])
    return {(str(name), str(kind), str(text)) for name, kind, text in rows}
