"""A 403 for a capability the policy lacks makes no new login: only a token the server no longer accepts is
replaced."""

from __future__ import annotations

import pytest

from keys.errors import KeyUnavailable
from tests.support.openbao_fixtures import openbao_keyring_for


def test_a_forbidden_capability_makes_no_new_login(openbao_server, tmp_path):
    """A policy short of one capability (an operator's mistake) is a 403 a new login cannot cure: the token still
    works (lookup-self), so no new AppRole login is made (none would add a token and lease per refused call, each
    spending one of the secret id's uses)."""
    admin = openbao_server.admin()
    admin.sys.create_or_update_policy("no-delete",
                                      'path "scratchvault/data/*" { capabilities = ["create", "read", "update"] }')
    admin.auth.approle.create_or_update_approle("no-delete", token_policies=["no-delete"], token_ttl="20m")
    secret = tmp_path / "secret-id"
    secret.write_text(admin.auth.approle.generate_secret_id("no-delete")["data"]["secret_id"])
    role = admin.auth.approle.read_role_id("no-delete")["data"]["role_id"]
    keyring = openbao_keyring_for(openbao_server, str(secret), role_id=role)
    keyring.set_password("scratchvault/probe/owner-key", "ab.1", "x")

    def tokens() -> int:
        accessors = admin.adapter.list("/v1/auth/token/accessors")["data"]["keys"]
        return sum(admin.auth.token.lookup_accessor(accessor)["data"]["meta"] == {"role_name": "no-delete"}
                   for accessor in accessors)

    before = tokens()
    for _ in range(5):
        with pytest.raises(KeyUnavailable, match="403"):
            keyring.delete_password("scratchvault/probe/owner-key", "ab.1")
    assert tokens() == before
