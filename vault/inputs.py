"""Validation of everything a caller (or, through the tool, a model) can pass: bad input is InvalidArgument.

Identifiers are compared exactly as given: no case folding, no Unicode normalisation, no trimming.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from vault.errors import InvalidArgument

MAX_IDENTIFIER_BYTES = 1024
MAX_STEP = 2**53 - 1  # exactly representable in JSON consumers that use doubles
READ_MODES = ("full", "head", "tail", "range")
_ROW_ID = re.compile(r"[0-9a-f]{32}")  # 16 bytes: one AES block (keys/blind_index.py)


def check_identifier(value: object, name: str) -> str:
    """A non-empty str of at most 1 KiB UTF-8, without NUL or lone surrogates."""
    if not isinstance(value, str):
        raise InvalidArgument(f"{name} must be a str, not {type(value).__name__}")
    if not value:
        raise InvalidArgument(f"{name} must not be empty")
    if "\x00" in value:
        raise InvalidArgument(f"{name} must not contain NUL")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidArgument(f"{name} must not contain lone surrogates") from None
    if size > MAX_IDENTIFIER_BYTES:
        raise InvalidArgument(f"{name} is longer than {MAX_IDENTIFIER_BYTES} bytes")
    return value


def check_optional_identifier(value: object, name: str) -> str | None:
    """None, or a valid identifier."""
    return None if value is None else check_identifier(value, name)


def check_int(value: object, name: str, low: int, high: int) -> int:
    """An int (not bool) within [low, high]."""
    if type(value) is not int:
        raise InvalidArgument(f"{name} must be an int, not {type(value).__name__}")
    if not low <= value <= high:
        raise InvalidArgument(f"{name} must be between {low} and {high}")
    return value


def check_step(value: object) -> int:
    """A step number: a non-negative int."""
    return check_int(value, "step_num", 0, MAX_STEP)


def check_ttl(value: object, max_ttl: float) -> float:
    """A positive, finite number of seconds, at most ``max_ttl``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgument(f"ttl_seconds must be a number, not {type(value).__name__}")
    if isinstance(value, int) and value > max_ttl:
        raise InvalidArgument(f"ttl_seconds must be at most {duration(max_ttl)}")
    seconds = float(value)
    if not math.isfinite(seconds) or seconds <= 0:
        raise InvalidArgument("ttl_seconds must be a positive, finite number")
    if seconds > max_ttl:
        raise InvalidArgument(f"ttl_seconds must be at most {duration(max_ttl)}")
    return seconds


def duration(seconds: float) -> str:
    """A lifetime as a reader wants it: whole seconds written out (never in exponent form), and the days too
    when it is a whole number of days; a fractional limit keeps its fraction."""
    if not float(seconds).is_integer():
        return f"{seconds} seconds"
    whole = int(seconds)
    count = whole // 86400
    days = f" ({count} day{'s' if count > 1 else ''})" if count and whole % 86400 == 0 else ""
    return f"{whole} seconds{days}"


def parse_row_id(value: object) -> bytes | None:
    """Row id bytes, or None for a str that cannot be an id (the caller answers NotFound, as for any miss)."""
    if not isinstance(value, str):
        raise InvalidArgument(f"id must be a str, not {type(value).__name__}")
    if not _ROW_ID.fullmatch(value):
        return None
    return bytes.fromhex(value)


def check_read_args(mode: object, n: object, start: object, end: object) -> tuple[str, int, int | None, int | None]:
    """Validate a read request: known mode, non-negative ints, end >= start; start/end only with range."""
    if not isinstance(mode, str) or mode not in READ_MODES:
        raise InvalidArgument(f"mode must be one of {', '.join(READ_MODES)}")
    count = _non_negative(n, "n")
    first = None if start is None else _non_negative(start, "start")
    last = None if end is None else _non_negative(end, "end")
    check_read_window(mode, first, last)
    return mode, count, first, last


def check_read_window(mode: str, start: int | None, end: int | None) -> None:
    """start and end only with range, and end not before start (the vault's rule and the tool's)."""
    if mode != "range" and (start is not None or end is not None):
        raise InvalidArgument("start and end are only allowed with mode 'range'")
    if start is not None and end is not None and end < start:
        raise InvalidArgument("end must not be less than start")


def _non_negative(value: object, name: str) -> int:
    if type(value) is not int:
        raise InvalidArgument(f"{name} must be an int, not {type(value).__name__}")
    if value < 0:
        raise InvalidArgument(f"{name} must not be negative")
    return value


def check_positive_setting(value: Any, name: str) -> float:
    """A positive, finite number for a Vault setting."""
    seconds = _finite(value)
    if seconds is None or seconds <= 0:
        raise InvalidArgument(f"{name} must be a positive, finite number")
    return seconds


def check_time(value: object) -> float:
    """A finite number of seconds (a clock reading or ``gc``'s ``now``)."""
    seconds = _finite(value)
    if seconds is None:
        raise InvalidArgument("time must be a finite number of seconds")
    return seconds


def expiry(now: float, ttl: float) -> float:
    """``now + ttl``, refused when the sum cannot be told apart from ``now`` or is not finite."""
    expires_at = now + ttl
    if not now < expires_at < math.inf:
        raise InvalidArgument("ttl_seconds is too small (or too large) to be represented at this time")
    return expires_at


def check_progress(progress: object) -> None:
    """A progress callback must be callable: checked before any irreversible step."""
    if progress is not None and not callable(progress):
        raise InvalidArgument("progress must be a callable taking the running total")


def _finite(value: object) -> float | None:
    """``value`` as a finite float (ints of any size included), or None; bools are not numbers here."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        seconds = float(value)
    except OverflowError:
        return None
    return seconds if math.isfinite(seconds) else None


def check_keywords(owner: str, given: Mapping[str, object], known: frozenset[str]) -> None:
    """A keyword the call does not take is a TypeError, as for any Python function."""
    for name in given:
        if name not in known:
            raise TypeError(f"{owner}() got an unexpected keyword argument {name!r}")
