"""What doctor says of one PostgreSQL server's settings: whether an acknowledged row survives a crash whole, and
which copies of the WAL (where deleted rows live on) leave the server. Asked of the server the vault connects to
and, on Citus, of every worker."""

from __future__ import annotations

from collections.abc import Mapping

from vault.storage.base import Finding

DURABLE_COMMITS = ("on", "remote_apply", "remote_write", "local")  # each waits for the local WAL flush
# a server's settings that matter for durability and for copies of deleted rows, as one JSON object (also what
# each Citus worker is asked)
NODE_SETTINGS = ("SELECT json_build_object('fsync', current_setting('fsync'), 'synchronous_commit', "
                 "current_setting('synchronous_commit'), 'full_page_writes', current_setting('full_page_writes'), "
                 "'wal_level', current_setting('wal_level'), 'archive_mode', current_setting('archive_mode'), "
                 "'replicas', (SELECT count(*) FROM pg_catalog.pg_stat_replication), "
                 "'slots', (SELECT count(*) FROM pg_catalog.pg_replication_slots))::text")


def durability(node: Mapping[str, object]) -> list[Finding]:
    """What doctor says of one server's settings (``NODE_SETTINGS``): fsync, synchronous_commit and
    full_page_writes keep acknowledged rows whole through a crash; archives, replicas and replication slots are
    copies of the WAL, where deleted rows live on."""
    fsync, commit, pages = node["fsync"], node["synchronous_commit"], node["full_page_writes"]
    found = [Finding("ok" if fsync == "on" else "FAIL", f"fsync {fsync}" + (
        "" if fsync == "on" else ": a crash can lose or corrupt acknowledged rows; turn it on")),
             Finding("ok" if commit in DURABLE_COMMITS else "FAIL", f"synchronous_commit {commit}" + (
                 "" if commit in DURABLE_COMMITS else ": a crash can lose rows a put acknowledged; turn it on")),
             Finding("ok" if pages == "on" else "FAIL", f"full_page_writes {pages}" + (
                 "" if pages == "on" else ": a crash can leave torn pages, corrupting rows; turn it on"))]
    archive, replicas, slots = node["archive_mode"], node["replicas"], node["slots"]
    copies = ([f"archive_mode {archive}"] if archive != "off" else []) + (
        [f"{replicas} replica(s) streaming"] if replicas else []) + ([f"{slots} replication slot(s)"] if slots else [])
    if copies:
        found.append(Finding("WARN", f"copies of the WAL leave this server ({', '.join(copies)}): deleted and "
                                     "expired rows live on there until the key version that wrapped them is "
                                     "retired; run 'scratchvault maintain' from a timer (README, \"Scheduled "
                                     "key maintenance\")"))
    else:
        found.append(Finding("ok", f"archive_mode off, no replicas or replication slots (wal_level "
                                   f"{node['wal_level']}; deleted rows still stay in the WAL and table files until "
                                   "their key version is retired)"))
    return found
