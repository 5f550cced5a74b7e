"""Canary scans of every byte a vault leaves in files: random canary strings that share one random tag, looked for
in each file (and in each file this process holds open, unlinked temporary files included) as UTF-8, UTF-16 (both
byte orders) and hex (bytea's text form). One scan finds the tag's spelling in each form with ``bytes.find`` and
checks the canary after it, so gigabytes of WAL are read once, not once per canary."""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

FORMS = ("utf-8", "utf-16-le", "utf-16-be", "hex")


def spelled(text: str, form: str) -> bytes:
    """``text`` as it would appear in a file in ``form``."""
    return text.encode().hex().encode() if form == "hex" else text.encode(form)


@dataclass
class Canaries:
    """Named canary strings (``CANARY<tag><name><random>``), all of one random tag."""

    tag: str = field(default_factory=lambda: "CANARY" + secrets.token_hex(4).upper())
    made: dict[str, str] = field(default_factory=dict)

    def new(self, name: str) -> str:
        self.made[name] = f"{self.tag}{name}{secrets.token_hex(8)}"
        return self.made[name]

    def found_in(self, data: bytes) -> set[str]:
        """``"<name> as <form>"`` for each canary whose spelling in a form occurs in ``data``."""
        found: set[str] = set()
        for form in FORMS:
            tag = spelled(self.tag, form)
            wanted = {spelled(value, form): name for name, value in self.made.items()}
            at = data.find(tag)
            while at != -1:
                found.update(f"{name} as {form}" for value, name in wanted.items() if data.startswith(value, at))
                at = data.find(tag, at + 1)
        return found


@dataclass
class Scan:
    """What a scan found (``"<name> as <form>"`` -> the files holding it) and every file it read."""

    found: dict[str, set[str]] = field(default_factory=dict)
    read: set[str] = field(default_factory=set)


def files_under(root: Path) -> Iterator[Path]:
    """Every regular file under ``root``, at any depth."""
    for directory, _, names in os.walk(root):
        for name in names:
            yield Path(directory, name)


def open_files() -> Iterator[Path]:
    """A path to every regular file this process holds open (``/proc/self/fd``): the unlinked temporary files
    SQLite and ``tempfile.TemporaryFile`` make are reachable only this way."""
    for fd in os.listdir("/proc/self/fd"):
        path = Path("/proc/self/fd", fd)
        try:
            if stat.S_ISREG(os.stat(path).st_mode):
                yield path
        except OSError:  # closed meanwhile (the listing's own descriptor among them)
            continue


def scan(canaries: Canaries, paths: Iterable[Path]) -> Scan:
    """Read each file whole (a file removed meanwhile, a recycled WAL segment or a temporary file, is skipped)."""
    result = Scan()
    for path in paths:
        try:
            data = path.read_bytes()
        except (FileNotFoundError, IsADirectoryError):
            continue
        shown = os.readlink(path) if path.parent == Path("/proc/self/fd") else str(path)
        result.read.add(shown)
        for needle in canaries.found_in(data):
            result.found.setdefault(needle, set()).add(shown)
    return result
