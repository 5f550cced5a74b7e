"""Peak resident memory of one operation (Linux): trim the heap, reset VmHWM, run, read VmHWM.

Freed memory that malloc keeps would hide an operation's own peak, so the heap is trimmed first
(glibc ``malloc_trim``); the high-water mark is then reset through /proc/self/clear_refs.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
from collections.abc import Callable
from pathlib import Path

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _libc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if not name:
        return None
    trim = getattr(ctypes.CDLL(name), "malloc_trim", None)
    return trim


_TRIM = _libc_trim()


def available() -> bool:
    """Whether peak RSS can be measured per operation on this system."""
    try:
        _CLEAR_REFS.write_text("5")
        return _TRIM is not None and _field("VmHWM") > 0
    except OSError:
        return False


def peak_growth_mib(operation: Callable[[], object]) -> float:
    """How far resident memory rose above its starting point while ``operation`` ran, in MiB."""
    gc.collect()
    if _TRIM is not None:
        _TRIM(0)
    _CLEAR_REFS.write_text("5")  # the high-water mark restarts at the current RSS
    before = _field("VmRSS")
    operation()
    return (_field("VmHWM") - before) / 1024


def _field(name: str) -> int:
    for line in _STATUS.read_text().splitlines():
        if line.startswith(name + ":"):
            return int(line.split()[1])
    return 0
