"""CPU seconds a load run cost, from Linux's /proc: a local PostgreSQL server's (its postmaster, every process
under it and those already gone), and the whole machine's (others' work included), so a run can say whether it
was bound by CPU. Elsewhere (another OS, a remote server) each figure is None, never a guess."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

_PROC = Path("/proc")


def _ticks() -> int:
    return os.sysconf("SC_CLK_TCK")


def parent_of(pid: int) -> int | None:
    """The parent of process ``pid``, None if there is no such process here."""
    fields = _stat_fields(pid)
    return int(fields[1]) if fields else None


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command (field 3, the state, first), or None if it is gone."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()


def tree_seconds(root: int) -> float | None:
    """CPU seconds of ``root`` and its children: their own (live ones), and those of children it has reaped."""
    fields = _stat_fields(root)
    if fields is None:
        return None
    # utime, stime, cutime, cstime are fields 14-17 of stat: 11-14 here
    total = sum(int(value) for value in fields[11:15])
    for entry in _PROC.iterdir():
        if entry.name.isdigit():
            child = _stat_fields(int(entry.name))
            if child is not None and int(child[1]) == root:
                total += int(child[11]) + int(child[12])
    return total / _ticks()


def machine_busy_seconds() -> float:
    """CPU seconds every core has spent busy since boot (all but idle and iowait), whoever ran."""
    first = (_PROC / "stat").read_text().splitlines()[0].split()[1:]
    values = [int(value) for value in first[:8]]
    return (sum(values) - values[3] - values[4]) / _ticks()


@dataclass
class CpuWindow:
    """CPU seconds spent between ``start`` and ``stop``: by a server's process tree (None: not measurable here),
    and by the whole machine."""

    server_pid: int | None = None
    server: float | None = None
    machine: float = 0.0

    def start(self) -> None:
        self.server = None if self.server_pid is None else tree_seconds(self.server_pid)
        self.machine = machine_busy_seconds()

    def stop(self) -> None:
        ended = None if self.server_pid is None else tree_seconds(self.server_pid)
        self.server = None if ended is None or self.server is None else ended - self.server
        self.machine = machine_busy_seconds() - self.machine
