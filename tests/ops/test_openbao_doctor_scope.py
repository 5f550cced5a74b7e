"""Doctor looks past the vault's two paths: capabilities the vault never uses, which would let its token undo a
guarantee (the mount's settings, undelete, destroy, policies), are a warning."""

from __future__ import annotations

from keys.openbao.doctor import report
from tests.support.openbao_fixtures import openbao_keyring_for


def test_doctor_warns_of_a_policy_that_grants_the_mount_config_and_undelete(openbao_server):
    """A policy that also lets the token rewrite the mount's settings (delete_version_after), undelete or destroy
    versions, or write policies is a warning naming those paths, not "exactly" the policy."""
    admin = openbao_server.admin()
    admin.sys.create_or_update_policy("too-wide", """
path "scratchvault/data/*" { capabilities = ["create", "read", "update"] }
path "scratchvault/metadata/*" { capabilities = ["delete", "list"] }
path "scratchvault/config" { capabilities = ["read", "update"] }
path "scratchvault/undelete/*" { capabilities = ["update"] }
path "scratchvault/destroy/*" { capabilities = ["update"] }
path "sys/policies/acl/*" { capabilities = ["create", "update"] }
""")
    token = admin.auth.token.create(policies=["too-wide"], ttl="10m")["auth"]["client_token"]
    findings = report(openbao_keyring_for(openbao_server, None, role_id=None, token=token, prefix=""))
    beyond = [(status, text) for status, text in findings if "beyond the vault's paths" in text]
    assert [status for status, _ in beyond] == ["warn"]
    for path in ("scratchvault/config", "scratchvault/undelete/", "scratchvault/destroy/", "sys/policies/acl/"):
        assert path in beyond[0][1]
    assert token not in repr(findings)
    # and the same token can indeed rewrite the mount's settings
    wide = openbao_keyring_for(openbao_server, None, role_id=None, token=token, prefix="")
    wide.session.call("planted", lambda client: client.secrets.kv.v2.configure(mount_point="scratchvault",
                                                                            delete_version_after="0s"))


def test_doctor_finds_nothing_beyond_the_vault_paths_for_the_policy_itself(openbao_keyring):
    assert ("ok", "token capabilities beyond the vault's paths: none") in report(openbao_keyring)
