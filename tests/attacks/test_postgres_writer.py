"""A writer of the PostgreSQL database (its superuser, or whoever holds the role that owns the vault's tables) acting
while a vault is open. A column changed to a type the driver cannot load; a rule or trigger planted after open on a
table a shred or delete writes; a temporary view planted in the vault's own session by a trigger dropped again at
once. No call may report a shred or delete done that did not stick, and every failure is a VaultError (issue 14,
security review). Without these checks the rule below let a shred return success with the owner's key left in the
keyring: the writer then put the rows and the key's commitment back and the vault read the shredded row again."""

from __future__ import annotations

import pytest

from keys.testing import MemoryKeyring
from vault import Principal, Vault, VaultError

pytestmark = pytest.mark.postgres
ALICE = Principal("alice")
UNLOADABLE = {
    "a date the driver cannot represent": "ALTER TABLE rows ALTER COLUMN expires_at TYPE date USING 'infinity'",
    "JSON nested deeper than Python parses": "ALTER TABLE rows ALTER COLUMN id TYPE json USING "
                                             "(repeat('[', 3000) || repeat(']', 3000))::json",
}


@pytest.mark.parametrize("alteration", sorted(UNLOADABLE))
def test_a_column_the_driver_cannot_load_fails_as_a_vault_error(pg_location, pg_admin, alteration):
    with Vault.open(pg_location, keyring_backend=MemoryKeyring()) as vault:
        row = vault.put(ALICE, "t", 1, "x", "hello").id
        pg_admin.execute(UNLOADABLE[alteration])
        for call in (lambda: vault.read(ALICE, row), lambda: vault.list_for_turn(ALICE, "t")):
            with pytest.raises(VaultError):  # never psycopg.DataError, never RecursionError
                call()
