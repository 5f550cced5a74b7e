"""The vault's keyring entries as a test reads them: the index key, and the entry name of an owner's keyset."""

from __future__ import annotations

from collections.abc import Callable

from keys.blind_index import IndexKey
from keys.keyset import parse_single_key
from keys.secret import Secret


def index_key_from(get_password: Callable[[str, str], str | None], index_service: str) -> IndexKey:
    """The vault's index key, read from the keyring (the test plays someone who holds it)."""
    return IndexKey(parse_single_key(Secret(get_password(index_service, "index")), "index key"))


def owner_username(get_password: Callable[[str, str], str | None], index_service: str, user_id: str) -> str:
    """The keyring user name of an owner's keyset: its owner tag in hex (it needs the vault's index key)."""
    return index_key_from(get_password, index_service).owner_tag(user_id).hex()
