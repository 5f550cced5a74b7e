"""``scratchvault doctor``: is this installation safe to use? Checks the keyring backend, then reports what the
store finds of the database (permissions, schema version, counts, integrity). Needs no keys; changes nothing."""

from __future__ import annotations

from pathlib import Path

from keys import resolve_backend
from vault import storage
from vault.errors import VaultError


def diagnose(path: Path | None) -> tuple[list[str], bool]:
    """Report lines and whether everything is safe."""
    lines: list[str] = []
    safe = True
    try:
        backend = resolve_backend(None)
        lines.append(f"ok    keyring backend: {type(backend).__module__}.{type(backend).__name__} "
                     f"(priority {backend.priority})")
    except VaultError as error:
        safe = False
        lines.append(f"FAIL  keyring backend: {error}")
    findings = storage.describe(Path(path) if path is not None else storage.default_location())
    lines += [f"{finding.status:<6}{finding.text}" for finding in findings]
    return lines, safe and all(finding.status != "FAIL" for finding in findings)
