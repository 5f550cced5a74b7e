"""The policy a vault's token needs, and nothing more: read and write (create, update) entries, delete them with
their metadata, list one folder (doctor and the erasure checks; the key layer never lists)."""

from __future__ import annotations

DATA_CAPABILITIES = ("create", "read", "update")
METADATA_CAPABILITIES = ("delete", "list")


def paths(mount: str, prefix: str) -> tuple[str, str]:
    """The policy's two paths: the entries' data, and their metadata."""
    folder = f"{prefix}/" if prefix else ""
    return f"{mount}/data/{folder}*", f"{mount}/metadata/{folder}*"


def policy_hcl(mount: str = "scratchvault", prefix: str = "") -> str:
    """The policy, in HCL (docs/openbao.md shows it for the default mount)."""
    data, metadata = paths(mount, prefix)

    def capabilities(names: tuple[str, ...]) -> str:
        return ", ".join(f'"{name}"' for name in names)

    return (f'path "{data}" {{\n  capabilities = [{capabilities(DATA_CAPABILITIES)}]\n}}\n'
            f'path "{metadata}" {{\n  capabilities = [{capabilities(METADATA_CAPABILITIES)}]\n}}\n')
