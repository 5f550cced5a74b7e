"""``scratchvault doctor``: is this installation safe to use? Checks the keyring backend, then reports what the
store finds of the database (SQLite: permissions, free space; PostgreSQL: the connection, the role, durability
and copies of the WAL; both: schema version, counts, integrity). Needs no keys; changes nothing."""

from __future__ import annotations

from pathlib import Path

from keys import resolve_backend
from vault import storage
from vault.errors import VaultError


def diagnose(location: str | Path | None) -> tuple[list[str], bool]:
    """Report lines and whether everything is safe, for a path or a postgresql:// URL (None: the default)."""
    lines: list[str] = []
    safe = True
    try:
        backend = resolve_backend(None)
        lines.append(f"ok    keyring backend: {type(backend).__module__}.{type(backend).__name__} "
                     f"(priority {backend.priority})")
        if type(backend).__module__.startswith("keys.openbao."):  # hvac is an optional dependency
            from keys.openbao.doctor import report

            found = report(backend)  # type: ignore[arg-type]  # the module check above picks OpenBaoKeyring
            safe = safe and all(status != "FAIL" for status, _ in found)
            lines += [f"{status:<6}{text}" for status, text in found]
    except VaultError as error:
        safe = False
        lines.append(f"FAIL  keyring backend: {error}")
    where = storage.default_location() if location is None else location
    postgres = storage.url_scheme(where) is not None
    findings = storage.describe(where if postgres else Path(where))
    if postgres:
        lines.append("      several hosts: every host must reach this same secret service through this backend "
                     "(a host with its own keyring cannot open the others' rows; README, \"Over PostgreSQL\")")
    lines += [f"{finding.status:<6}{finding.text}" for finding in findings]
    return lines, safe and all(finding.status != "FAIL" for finding in findings)
