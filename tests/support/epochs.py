"""What the expiry-epoch tests (tests/vault/test_expiry_erasure.py and its neighbours, tests/system/
test_epoch_processes.py) share: the default epoch settings, the keyring's epoch-key entries, and what each read-side
call hands out of a row, as whoever holds a copy of the database would try it."""

from __future__ import annotations

from vault import Principal, Vault, VaultError

E, SKEW = 3600, 300  # the defaults
MARKER = "the dentist is on Tuesday"


def epoch_entries(ring) -> list[str]:
    """The epoch keys' keyring entries (user names ``<E>.<e>.<attempt>``), of every vault in the keyring (not the
    ``<E>.destroyed-through`` and other markers beside them, which hold no key)."""
    return sorted(user for service, user in ring.secrets
                  if service.endswith("/epoch-key") and not user.endswith("-through"))


def outcomes(vault: Vault, who: Principal, row_id: str, turn: str = "t") -> dict[str, object]:
    """What each read-side call gives of a row: its text when it returns it, else the VaultError's class."""
    calls = {"get": lambda: vault.get(who, row_id).content,
             "read": lambda: vault.read(who, row_id, mode="full").content,
             "list": lambda: [rep.summary for rep in vault.list_for_turn(who, turn) if rep.id == row_id] or None}
    found: dict[str, object] = {}
    for name, call in calls.items():
        try:
            found[name] = call()
        except VaultError as error:
            found[name] = type(error)
    return found


def assert_nothing_of(vault: Vault, who: Principal, row_id: str, marker: str = MARKER) -> dict[str, object]:
    """No call hands out anything of the row: get and read raise a VaultError, list_for_turn omits it."""
    found = outcomes(vault, who, row_id)
    assert found["list"] is None or isinstance(found["list"], type), found
    assert all(isinstance(outcome, type) for name, outcome in found.items() if name != "list"), found
    assert marker not in repr(found)
    return found
