"""Peak resident memory of one operation (Linux: reset VmHWM through /proc/self/clear_refs, then read it)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def available() -> bool:
    """Whether peak RSS can be measured per operation on this system."""
    try:
        _CLEAR_REFS.write_text("5")
        return _field("VmHWM") > 0
    except OSError:
        return False


def peak_growth_mib(operation: Callable[[], object]) -> float:
    """How far resident memory rose above its starting point while ``operation`` ran, in MiB."""
    _CLEAR_REFS.write_text("5")  # the high-water mark restarts at the current RSS
    before = _field("VmRSS")
    operation()
    return (_field("VmHWM") - before) / 1024


def _field(name: str) -> int:
    for line in _STATUS.read_text().splitlines():
        if line.startswith(name + ":"):
            return int(line.split()[1])
    return 0
