"""The vault's keyring entries as a test reads them: the index key, and the entry names of owner key versions."""

from __future__ import annotations

from collections.abc import Callable

from keys.blind_index import IndexKey
from keys.keyring.entries import parse_single_key
from keys.keyring.secret import Secret


def index_key_from(get_password: Callable[[str, str], str | None], index_service: str) -> IndexKey:
    """The vault's index key, read from the keyring (the test plays someone who holds it)."""
    return IndexKey(parse_single_key(Secret(get_password(index_service, "index")), "index key"))


def owner_username(get_password: Callable[[str, str], str | None], index_service: str, user_id: str,
                   version: int = 1) -> str:
    """The keyring user name of one owner key version: the owner tag in hex (it needs the vault's index key), a
    dot, the version."""
    return f"{index_key_from(get_password, index_service).owner_tag(user_id).hex()}.{version}"


def is_owner_key_entry(service: str) -> bool:
    """Whether a keyring service is the one holding owner key versions (one write-once entry per version)."""
    return service.endswith("/owner-key")


def owner_key_entries(names: object) -> list[tuple[str, str]]:
    """The (service, user) names among ``names`` that hold owner key versions, sorted."""
    return sorted(name for name in names if is_owner_key_entry(name[0]))


def holds_a_key(name: tuple[str, str]) -> bool:
    """Whether the keyring entry ``(service, user)`` holds key material: not one of the marks beside the keys (an
    epoch length's ``-through`` markers, the list of epoch lengths, an owner's version marks in the
    ``owner-issued``, ``owner-retired`` and ``owner-swept`` services), which hold only numbers."""
    service, user = name
    return not (user.endswith("-through") or service.rsplit("/", 1)[-1] in ("epoch-lengths", "owner-issued",
                                                                            "owner-retired", "owner-swept"))
