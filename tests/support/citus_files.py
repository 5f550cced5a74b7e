"""What each node of the test Citus cluster keeps on disk, read as a thief with its data directory reads it: after
a CHECKPOINT on every node (what the buffers hold reaches the table files), every file of each data directory, the
table files and ``pg_wal`` among them, searched for canaries (tests/support/canary_scan.py) as UTF-8, UTF-16, hex,
and Base64 at each of its three alignments (a value Base64-encoded anywhere in a longer text)."""

from __future__ import annotations

import base64
from collections.abc import Iterable
from pathlib import Path

from tests.support.canary_scan import Canaries, files_under
from tests.support.citus import connect

BASE64 = "base64"


def base64_spellings(text: str) -> list[bytes]:
    """``text`` as it appears inside any Base64 text, one spelling per alignment: the text from its k-th byte on
    starts a group of three, and only whole groups are kept (the last partial one depends on what follows)."""
    data = text.encode()
    spellings = []
    for skipped in range(3):
        whole = (len(data) - skipped) // 3 * 3
        spellings.append(base64.b64encode(data[skipped:skipped + whole]))
    return spellings


def base64_found(canaries: Canaries, data: bytes) -> set[str]:
    """``"<name> as base64"`` for each canary whose Base64 spelling at some alignment occurs in ``data``; the tag's
    spelling is looked for first, as in :meth:`Canaries.found_in`."""
    found: set[str] = set()
    wanted = {name: base64_spellings(value) for name, value in canaries.made.items()}
    for alignment, tag in enumerate(base64_spellings(canaries.tag)):
        at = data.find(tag)
        while at != -1:
            found.update(f"{name} as {BASE64}" for name, spellings in wanted.items()
                         if data.startswith(spellings[alignment], at))
            at = data.find(tag, at + 1)
    return found


def checkpoint(node_urls: Iterable[str]) -> None:
    """CHECKPOINT every node: each one's dirty pages written to its table files."""
    for url in node_urls:
        with connect(url) as node:
            node.execute("CHECKPOINT")


def scan_nodes(canaries: Canaries, data_dirs: Iterable[Path]) -> dict[str, dict[str, set[str]]]:
    """For each node (by its data directory's name): each canary found (``"<name> as <form>"``) and the files
    holding it. A file removed meanwhile (a recycled WAL segment, a temporary file) is skipped."""
    by_node: dict[str, dict[str, set[str]]] = {}
    for data_dir in data_dirs:
        found = by_node.setdefault(data_dir.name, {})
        for path in files_under(data_dir):
            try:
                data = path.read_bytes()
            except (FileNotFoundError, IsADirectoryError):
                continue
            for needle in canaries.found_in(data) | base64_found(canaries, data):
                found.setdefault(needle, set()).add(str(path.relative_to(data_dir)))
    return by_node
