"""Where a keyring entry (service, user) lives in the KV v2 mount, and which entries are written once.

Path: ``[<prefix>/]<service>/<folder>/<user>``, the service's ``/`` kept as folders and every other character
outside ``[A-Za-z0-9._-]`` written ``~XX`` (so no entry can name ``..`` or another's folder). ``<folder>`` is the
user name up to its first ``.``: an owner's key versions (user ``<owner tag>.<version>``) share one folder of
their own, so listing what an owner has left is one small LIST, never one that grows with the number of owners.
The key layer itself never lists.

Written once (check-and-set 0, refused when the entry exists): the index key, every owner key version, and every
attempt at an epoch key (user ``<E>.<e>.<attempt>``). Marks and counters (owner marks, epoch markers, deletion
counters) are only ever raised, and the epoch lengths list only grows: ``rewrite`` names each entry's rule and
``merged`` applies it, so that a write re-applied over another machine's (keys/openbao/backend.py) never moves
a mark back or drops a length.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Literal

from keys.epochs.lengths import MADE
from keys.epochs.marks import MARKER, PROBED, epoch_mark_value
from keys.keyring.owner_marks import owner_mark_value
from keys.ledger import deletion_count_value

Rewrite = Literal["once", "raise", "union", "replace"]
_RAISED_KINDS = ("owner-issued", "owner-retired", "owner-swept", "deletions")
_EPOCH_MARK_USER = re.compile(rf"[0-9]+\.(?:{MARKER}|{PROBED}|{MADE})")
_NUMBER = re.compile(r"[0-9]{1,19}")

_SAFE = re.compile(r"[A-Za-z0-9_-]")
_EPOCH_KEY_USER = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+")


def escape(segment: str) -> str:
    """One path segment: safe characters kept, '.' kept inside, everything else (and a segment of dots) ~XX."""
    if segment.strip(".") == "":
        return "".join(f"~{ord(char):02x}" for char in segment) or "~"
    return "".join(char if _SAFE.fullmatch(char) or char == "." else
                   "".join(f"~{byte:02x}" for byte in char.encode()) for char in segment)


def folder(prefix: str, service: str) -> str:
    """The folder of a service's entries."""
    segments = [escape(part) for part in service.split("/")]
    return "/".join([prefix, *segments] if prefix else segments)


def entry_path(prefix: str, service: str, username: str) -> str:
    """The path of one entry, relative to the mount."""
    return f"{folder(prefix, service)}/{owner_folder(username)}/{escape(username)}"


def owner_folder(username: str) -> str:
    """The folder an entry's user name falls in (its part before the first '.')."""
    return escape(username.split(".", 1)[0])


def written_once(service: str, username: str) -> bool:
    """Whether the key layer writes this entry exactly once (a rewrite would replace a key)."""
    kind = service.rsplit("/", 1)[-1]
    return kind in ("index", "owner-key") or (kind == "epoch-key" and _EPOCH_KEY_USER.fullmatch(username) is not None)


def rewrite(service: str, username: str) -> Rewrite:
    """How a write treats what the entry holds: ``once`` (refused when it exists), ``raise`` (a decimal mark or
    counter, never lowered), ``union`` (the comma-separated epoch lengths, never shrunk), ``replace`` (anything else
    a keyring user stores)."""
    kind = service.rsplit("/", 1)[-1]
    if written_once(service, username):
        return "once"
    if kind in _RAISED_KINDS or (kind == "epoch-key" and _EPOCH_MARK_USER.fullmatch(username)):
        return "raise"
    return "union" if kind == "epoch-lengths" else "replace"


def mark_reader(service: str) -> Callable[[str], int | None]:
    """How the key layer reads a raised entry of this service: the one parser per kind, so that the merge counts
    exactly what the reader counts (a value the reader refuses never outranks a write)."""
    kind = service.rsplit("/", 1)[-1]
    if kind == "deletions":
        return deletion_count_value
    return owner_mark_value if kind.startswith("owner-") else epoch_mark_value


def merged(rule: Rewrite, stored: str | None, given: str, read_mark: Callable[[str], int | None]) -> str:
    """What a write of ``given`` leaves in an entry that holds ``stored`` (None: absent): the higher of two marks
    as ``read_mark`` reads them, the union of two lists of lengths, else ``given``. Stored text the key layer would
    not read as a mark (or a list of numbers) counts as nothing: a planted out-of-range value is written over."""
    if stored is None or rule in ("once", "replace"):
        return given
    if rule == "raise":
        kept, wanted = read_mark(stored), read_mark(given)
        return stored if kept is not None and wanted is not None and kept >= wanted else given
    lengths = {int(part) for part in f"{stored},{given}".split(",") if _NUMBER.fullmatch(part)}
    return ",".join(str(length) for length in sorted(lengths))


def unescape(segment: str) -> str:
    """The text of one escaped segment."""
    out, i = bytearray(), 0
    while i < len(segment):
        if segment[i] == "~":
            if segment == "~":
                return ""
            out.append(int(segment[i + 1:i + 3], 16))
            i += 3
        else:
            out += segment[i].encode()
            i += 1
    return out.decode()


def entry_of(prefix: str, path: str) -> tuple[str, str]:
    """The (service, user) of an entry's path (relative to the mount): the inverse of ``entry_path``."""
    parts = path.split("/")[len(prefix.split("/")) if prefix else 0:]
    return "/".join(unescape(part) for part in parts[:-2]), unescape(parts[-1])
