"""A sealed, stopped, forbidding or stalled OpenBao server, and tokens revoked, expired or short of a capability:
each fails closed (KeyUnavailable with a remedy, nothing written in the database or the server) and the same
open vault works again by itself once the server does. A private server: sealing and stopping it disturbs no other
test."""

from __future__ import annotations

import time
import uuid

import pytest

from keys.errors import KeyUnavailable
from tests.support.openbao_fixtures import openbao_keyring_for, started_server
from tests.support.stall_proxy import StallProxy
from vault import Principal, Vault


@pytest.fixture(scope="module")
def private_server(tmp_path_factory):
    server = started_server(tmp_path_factory.mktemp("bao-faults"))
    yield server
    server.stop()


@pytest.fixture
def secret_id(private_server):
    return private_server.secret_id_file(uuid.uuid4().hex[:8])


def owner() -> Principal:
    return Principal(f"owner-{uuid.uuid4().hex[:8]}")


def fails_closed(vault: Vault, match: str) -> tuple[Principal, KeyUnavailable]:
    """A new owner's first put is KeyUnavailable (with ``match`` in its remedy); the owner, to check once the server
    is back that no row of theirs was stored."""
    newcomer = owner()
    with pytest.raises(KeyUnavailable, match=match) as error:
        vault.put(newcomer, "t", 1, "tool", "must not be stored")
    return newcomer, error.value


def works(vault: Vault) -> None:
    someone = owner()
    row = vault.put(someone, "t", 1, "tool", "stored").id
    assert vault.get(someone, row).content == "stored"


def test_a_sealed_server_fails_closed_and_the_vault_recovers_when_it_is_unsealed(private_server, secret_id, tmp_path):
    keyring = openbao_keyring_for(private_server, secret_id)
    with Vault.open(tmp_path / "v.db", keyring_backend=keyring, key_cache_seconds=0.001) as vault:
        works(vault)
        before = set(keyring.secrets)
        private_server.seal()
        try:
            newcomer, _ = fails_closed(vault, "sealed")
        finally:
            private_server.unseal()
        assert set(keyring.secrets) == before, "an entry was written while the server was sealed"
        assert vault.list_for_turn(newcomer, "t") == []
        works(vault)


def test_a_stopped_server_fails_closed_and_the_vault_recovers_when_it_restarts(private_server, secret_id, tmp_path):
    keyring = openbao_keyring_for(private_server, secret_id)
    with Vault.open(tmp_path / "v.db", keyring_backend=keyring) as vault:
        works(vault)
        before = set(keyring.secrets)
        private_server.stop()
        try:
            newcomer, _ = fails_closed(vault, "could not be reached")
        finally:
            private_server.launch()
        assert set(keyring.secrets) == before
        assert vault.list_for_turn(newcomer, "t") == []
        works(vault)


def test_a_revoked_approle_token_is_replaced_by_a_new_login(private_server, secret_id, tmp_path):
    keyring = openbao_keyring_for(private_server, secret_id)
    with Vault.open(tmp_path / "v.db", keyring_backend=keyring) as vault:
        works(vault)
        private_server.admin().auth.token.revoke(keyring.session._client.token)
        works(vault)


def test_a_revoked_or_expired_token_fails_closed_and_a_new_one_recovers(private_server, tmp_path):
    admin = private_server.admin()
    token_file = tmp_path / "token"
    token_file.write_text(admin.auth.token.create(policies=["scratchvault"], ttl="1h")["auth"]["client_token"])
    keyring = openbao_keyring_for(private_server, None, role_id=None, token_file=str(token_file))
    with Vault.open(tmp_path / "v.db", keyring_backend=keyring) as vault:
        works(vault)
        admin.auth.token.revoke(token_file.read_text())
        before = set(keyring.secrets)
        _, error = fails_closed(vault, "revoked or")
        assert set(keyring.secrets) == before
        assert token_file.read_text() not in str(error)
        short = admin.auth.token.create(policies=["scratchvault"], ttl="2s", renewable=False)["auth"]["client_token"]
        token_file.write_text(short)
        works(vault)  # the file's new token is read at the next login
        time.sleep(2.5)
        fails_closed(vault, "revoked or")
        token_file.write_text(admin.auth.token.create(policies=["scratchvault"], ttl="1h")["auth"]["client_token"])
        works(vault)


def test_a_token_lacking_a_capability_writes_nothing(private_server, tmp_path):
    admin = private_server.admin()
    admin.sys.create_or_update_policy("no-create", 'path "scratchvault/data/*" { capabilities = ["read", "update"] }')
    token = admin.auth.token.create(policies=["no-create"], ttl="1h")["auth"]["client_token"]
    keyring = openbao_keyring_for(private_server, None, role_id=None, token=token)
    with pytest.raises(KeyUnavailable, match="403") as error:
        Vault.open(tmp_path / "v.db", keyring_backend=keyring)
    assert "policy in docs/openbao.md" in str(error.value)
    assert len(keyring.secrets) == 0


def test_an_approle_token_past_its_ttl_is_renewed_or_replaced(private_server, tmp_path):
    admin = private_server.admin()
    admin.auth.approle.create_or_update_approle("short", token_policies=["scratchvault"], token_ttl="2s",
                                                token_max_ttl="3s", secret_id_num_uses=0)
    secret = tmp_path / "short-secret"
    secret.write_text(admin.auth.approle.generate_secret_id("short")["data"]["secret_id"])
    role = admin.auth.approle.read_role_id("short")["data"]["role_id"]
    keyring = openbao_keyring_for(private_server, str(secret), role_id=role)
    with Vault.open(tmp_path / "v.db", keyring_backend=keyring, key_cache_seconds=0.001) as vault:
        for _ in range(4):  # 5 s: past the token's max TTL, so renewal alone would not do
            works(vault)
            time.sleep(1.25)


def test_a_stalled_server_is_key_unavailable_within_the_keyring_timeout(private_server, secret_id, tmp_path):
    port = int(private_server.addr.rsplit(":", 1)[1])
    proxy = StallProxy(port)
    try:
        keyring = openbao_keyring_for(private_server, secret_id, addr=f"https://127.0.0.1:{proxy.port}", timeout=3)
        with Vault.open(tmp_path / "v.db", keyring_backend=keyring, keyring_timeout=1) as vault:
            works(vault)
            before = set(keyring.secrets)
            proxy.stall()
            started = time.monotonic()
            try:
                newcomer, _ = fails_closed(vault, "did not answer within 1 s")
            finally:
                waited = time.monotonic() - started
                proxy.release()
            assert waited < 2.5
            assert keyring.config.timeout == 1  # Vault.open bounded the HTTP timeout by keyring_timeout
            time.sleep(1.5)  # the stalled request's own timeout (keyring_timeout) has ended it
            assert set(keyring.secrets) == before, "a write landed after the vault gave up on it"
            assert vault.list_for_turn(newcomer, "t") == []
            works(vault)
    finally:
        proxy.close()
