"""A token without OpenBao's default policy cannot look itself up: the remedy names that, not only a revoked or
expired token."""

from __future__ import annotations

import pytest

from keys.errors import KeyUnavailable
from tests.support.openbao_fixtures import openbao_keyring_for


def test_a_token_without_the_default_policy_is_told_so(openbao_server):
    token = openbao_server.admin().auth.token.create(policies=["scratchvault"], no_default_policy=True,
                                                     ttl="10m")["auth"]["client_token"]
    keyring = openbao_keyring_for(openbao_server, None, role_id=None, token=token)
    with pytest.raises(KeyUnavailable, match="default policy") as error:
        keyring.get_password("scratchvault/x/index", "index")
    assert token not in str(error.value)
