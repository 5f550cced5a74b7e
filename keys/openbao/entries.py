"""One KV v2 entry as the server holds it, read so that absence is real absence.

A read tells three states apart. **Absent**: the engine's own 404, with no version metadata and no error text (never
written, or deleted with its metadata). **Deleted**: the latest version soft-deleted, destroyed or lapsed under the
mount's ``delete_version_after``; the server answers 404 with that version's metadata, and ``undelete`` could bring
it back, so it is neither absent nor a value. **Live**: the latest version's fields. Any other 404 (``no handler
for route``: the mount is gone) is KeyUnavailable, never "absent". Each state carries the latest version number,
the check-and-set a write based on this read sends (0 when absent).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hvac import exceptions as bao_errors
from hvac import utils as bao_utils

from keys.errors import KeyUnavailable
from keys.openbao.config import SEE_DOCS

FIELD = "password"  # the one field of each KV entry


@dataclass(frozen=True, slots=True)
class Stored:
    """What the server holds at one path: its latest version number (0: absent), whether that version is deleted,
    and its text (None when absent, deleted, or not a scratchvault entry)."""

    version: int
    deleted: bool = False
    text: str | None = None

    @property
    def absent(self) -> bool:
        return self.version == 0

    def __repr__(self) -> str:
        return f"Stored(version={self.version}, deleted={self.deleted})"


ABSENT = Stored(0)


def read_entry(client: Any, mount: str, path: str) -> Stored:
    """The latest version at ``path`` (see the module's docstring). Raises outside any handler, so that no hvac
    exception (whose frames hold the request and its token) is chained to what leaves."""
    url = bao_utils.format_url("/v1/{mount}/data/{path}", mount=mount, path=path)
    try:
        body = client.adapter.get(url)
        missing = False
    except bao_errors.InvalidPath as error:
        body, missing = error.json, True
    data = _mapping(body, "data")
    metadata = _mapping(data, "metadata")
    version = metadata.get("version")
    if missing and not metadata:
        if isinstance(body, dict) and body.get("errors") == []:
            return ABSENT
        raise KeyUnavailable(f"OpenBao has no KV engine at the mount {mount} any more (a 404 not from the engine): "
                             f"enable it again or restore the server from a backup; {SEE_DOCS}")
    if not isinstance(version, int) or version < 1:
        raise KeyUnavailable(f"OpenBao answered a read under the mount {mount} without a version; check that it is "
                             f"a KV version 2 engine; {SEE_DOCS}")
    if missing or metadata.get("destroyed"):  # a live version may carry a deletion_time still to come
        return Stored(version, deleted=True)
    text = _mapping(data, "data").get(FIELD)
    return Stored(version, text=text if isinstance(text, str) else None)


def _mapping(body: Any, name: str) -> dict[str, Any]:
    """``body[name]`` when both are mappings, else an empty one (a malformed answer holds nothing)."""
    inner = body.get(name) if isinstance(body, dict) else None
    return inner if isinstance(inner, dict) else {}


def write_entry(client: Any, mount: str, path: str, text: str, cas: int) -> None:
    """A new version at ``path``, accepted only while the entry's latest version is ``cas`` (0: absent)."""
    client.secrets.kv.v2.create_or_update_secret(path=path, secret={FIELD: text}, cas=cas, mount_point=mount)


def delete_entry(client: Any, mount: str, path: str) -> None:
    """Every version and the metadata at ``path`` (nothing left to undelete); a no-op when there is none."""
    client.secrets.kv.v2.delete_metadata_and_all_versions(path=path, mount_point=mount)


DELETED_REMEDY = ("the latest version of a keyring entry of this vault in OpenBao was deleted or destroyed on the "
                  "server (by a token other than the vault's, or by the mount's delete_version_after): undelete "
                  "it (bao kv undelete) or restore it from a backup of the server; if it is meant to be gone, "
                  "delete it with its metadata (bao kv metadata delete); set delete_version_after to 0 on the "
                  f"mount; {SEE_DOCS}")
