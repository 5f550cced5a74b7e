"""Starting and stopping the nodes of the test Citus cluster (tests/support/citus.py) from a test: stopping a worker
the way a crash does and starting it again, and a third worker made the way scripts/citus.sh makes the others
(initdb with ``shared_preload_libraries = 'citus'`` and ``wal_level = logical``, 127.0.0.1 and a socket in its own
dir, trust, the test database with the extension) that a test adds to the coordinator and that is removed again.

PostgreSQL's programs refuse root, so as root they run as the ``postgres`` account (``runuser``), from a directory
that account may enter, as scripts/postgres.sh's ``as_postgres_in`` runs them.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

from tests.support.citus import connect

NODE_SETTINGS = """
listen_addresses = '127.0.0.1'
port = {port}
unix_socket_directories = '{socket_dir}'
shared_preload_libraries = 'citus'
wal_level = logical
fsync = on
synchronous_commit = on
"""


def port_of(url: str) -> int:
    """The TCP port of a node's URL (the harness gives every node one)."""
    port = urlsplit(url).port
    assert port is not None, "the harness gives every node a TCP port"
    return port


def database_of(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


def as_postgres(command: list[str], directory: Path) -> None:
    """Run a PostgreSQL program from ``directory`` (as ``postgres`` when root), in a session of its own (a server it
    starts outlives whatever ends the test's process group); its output in the failure."""
    if os.geteuid() == 0:
        command = ["runuser", "-u", "postgres", "--", *command]
    done = subprocess.run(command, cwd=directory, capture_output=True, text=True, timeout=120, check=False,
                          start_new_session=True)
    assert done.returncode == 0, f"{command[-1]} failed ({done.returncode}): {done.stdout}{done.stderr}"


def stop_immediately(pg_ctl: Path, data_dir: Path) -> None:
    """Stop a node as a crash would: no checkpoint, every connection cut (``pg_ctl stop -m immediate``)."""
    as_postgres([str(pg_ctl), "-D", str(data_dir), "-w", "-t", "30", "-m", "immediate", "stop"], data_dir.parent)


def start(pg_ctl: Path, data_dir: Path) -> None:
    """Start a node again (crash recovery first when it was stopped immediately); its log beside its data dir."""
    log = data_dir.parent / f"{data_dir.name}.log"
    as_postgres([str(pg_ctl), "-D", str(data_dir), "-w", "-t", "60", "-l", str(log), "start"], data_dir.parent)


@contextmanager
def stopped(pg_ctl: Path, data_dir: Path) -> Iterator[None]:
    """The node stopped immediately for the block, started again after it, whatever the block raised."""
    stop_immediately(pg_ctl, data_dir)
    try:
        yield
    finally:
        start(pg_ctl, data_dir)


def free_port() -> int:
    """A port free on 127.0.0.1 now (the kernel's choice; a clash at start fails the test)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _make_node(pg_ctl: Path, node_dir: Path, port: int, database: str) -> None:
    """initdb, configure and start a node in ``node_dir``; make ``database`` with the extension on it."""
    bin_dir, data_dir = pg_ctl.parent, node_dir / "data"
    as_postgres([str(bin_dir / "initdb"), "-D", str(data_dir), "-U", "postgres", "--auth-local=trust",
                 "--auth-host=reject", "--encoding=UTF8", "--locale=C", "--no-sync"], node_dir)
    (data_dir / "pg_hba.conf").write_text("local all all trust\nhost all all 127.0.0.1/32 trust\n")
    with open(data_dir / "postgresql.conf", "a") as settings:
        settings.write(NODE_SETTINGS.format(port=port, socket_dir=node_dir))
    start(pg_ctl, data_dir)
    with connect(f"postgresql://postgres@127.0.0.1:{port}/postgres") as server:
        server.execute(f'CREATE DATABASE "{database}"')
    with connect(f"postgresql://postgres@127.0.0.1:{port}/{database}") as node:
        node.execute("CREATE EXTENSION citus")


@contextmanager
def spare_worker(coordinator_url: str, pg_ctl: Path) -> Iterator[str]:
    """A new node, started with the test database and the extension but not yet a worker: its superuser URL. A
    test adds it (``citus_add_node``) when it chooses. Afterwards it is removed from the coordinator if it was
    added (whatever still has shards on it must have been dropped or drained), then stopped and deleted."""
    node_dir = Path(tempfile.mkdtemp(prefix="scratchvault-citus-node."))
    if os.geteuid() == 0:
        shutil.chown(node_dir, "postgres", "postgres")
    port, database = free_port(), database_of(coordinator_url)
    data_dir = node_dir / "data"
    try:
        _make_node(pg_ctl, node_dir, port, database)
        yield f"postgresql://postgres@127.0.0.1:{port}/{database}"
        with connect(coordinator_url) as coordinator:
            coordinator.execute("SELECT citus_remove_node(nodename, nodeport) FROM pg_dist_node "
                                "WHERE nodename = '127.0.0.1' AND nodeport = %s", [port])
    finally:
        if (data_dir / "postmaster.pid").exists():
            as_postgres([str(pg_ctl), "-D", str(data_dir), "-w", "-t", "30", "-m", "fast", "stop"], node_dir)
        shutil.rmtree(node_dir, ignore_errors=True)
