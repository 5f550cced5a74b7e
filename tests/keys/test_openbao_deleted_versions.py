"""A key whose latest version was deleted on the OpenBao server behind the vault's back (soft-deleted, destroyed, or
lapsed under ``delete_version_after``) is unavailable, never absent: reading it is KeyUnavailable with a remedy,
nothing is written over it, and deleting it removes the metadata and every version, so that no token can undelete
it afterwards. Doctor fails on a mount whose versions lapse."""

from __future__ import annotations

import contextlib
import time
import uuid

import pytest
from hvac import exceptions as bao_errors

from keys.errors import KeyUnavailable
from keys.openbao.doctor import report
from keys.openbao.layout import entry_path
from tests.support.openbao_fixtures import kv2_mount, openbao_keyring_for
from vault import Principal, Vault

MARKS = "scratchvault/" + "ab" * 16 + "/owner-issued"


def remove_latest(openbao_server, path: str, removal: str) -> None:
    """What a root token (or the mount's delete_version_after) does to the latest of two versions."""
    kv = openbao_server.admin().secrets.kv.v2
    if removal == "soft-delete":
        kv.delete_latest_version_of_secret(path=path, mount_point="scratchvault")
    elif removal == "destroy":
        kv.destroy_secret_versions(path=path, versions=[2], mount_point="scratchvault")
    else:  # lapsed: the delete_version_after set before the write passes
        time.sleep(1.3)


def assert_nothing_to_undelete(openbao_server, path: str) -> None:
    kv = openbao_server.admin().secrets.kv.v2
    with pytest.raises(bao_errors.InvalidPath):
        kv.read_secret_metadata(path=path, mount_point="scratchvault")
    with contextlib.suppress(bao_errors.VaultError):
        kv.undelete_secret_versions(path=path, versions=[1, 2], mount_point="scratchvault")
    for version in (1, 2):
        with pytest.raises(bao_errors.InvalidPath):
            kv.read_secret_version(path=path, version=version, mount_point="scratchvault",
                                   raise_on_deleted_version=True)


@pytest.mark.parametrize("removal", ["soft-delete", "destroy", "lapsed"])
def test_a_latest_version_deleted_on_the_server_is_unavailable_and_a_delete_leaves_nothing(
        openbao_keyring, openbao_server, removal):
    path = entry_path(openbao_keyring.config.prefix, MARKS, "cd")
    if removal == "lapsed":  # a version lapses after the delete_version_after in force when it was written
        openbao_server.admin().secrets.kv.v2.update_metadata(path=path, delete_version_after="1s",
                                                             mount_point="scratchvault")
    openbao_keyring.set_password(MARKS, "cd", "1")
    openbao_keyring.set_password(MARKS, "cd", "2")
    remove_latest(openbao_server, path, removal)
    with pytest.raises(KeyUnavailable, match="undelete it"):
        openbao_keyring.get_password(MARKS, "cd")
    with pytest.raises(KeyUnavailable, match="undelete it"):
        openbao_keyring.set_password(MARKS, "cd", "3")  # nothing is written over what could be undeleted
    openbao_keyring.delete_password(MARKS, "cd")
    assert_nothing_to_undelete(openbao_server, path)
    assert openbao_keyring.get_password(MARKS, "cd") is None


def test_an_owner_key_deleted_on_the_server_is_unavailable_and_a_shred_removes_it_for_good(
        openbao_keyring, openbao_server, tmp_path, clock):
    alice = Principal(f"alice-{uuid.uuid4().hex[:6]}")
    with Vault.open(tmp_path / "v.db", keyring_backend=openbao_keyring, clock=clock, key_cache_seconds=0.001) as vault:
        row = vault.put(alice, "t", 1, "tool", "kept in OpenBao").id
        owner_keys = [path for path in openbao_keyring.secrets.paths() if "/owner-key/" in path]
        assert len(owner_keys) == 1
        kv = openbao_server.admin().secrets.kv.v2
        kv.delete_latest_version_of_secret(path=owner_keys[0], mount_point="scratchvault")
        clock.advance(1)
        with pytest.raises(KeyUnavailable, match="undelete it"):
            vault.get(alice, row)
        vault.shred_owner(alice.user_id)
    assert_nothing_to_undelete(openbao_server, owner_keys[0])
    assert [path for path in openbao_keyring.secrets.paths() if "/owner-key/" in path] == []


def test_doctor_fails_a_mount_whose_versions_lapse(openbao_server):
    kv2_mount(openbao_server, "kv-lapse", delete_version_after="1h")
    keyring = openbao_keyring_for(openbao_server, None, role_id=None, token=openbao_server.root_token,
                                  mount="kv-lapse")
    findings = report(keyring)
    assert [status for status, text in findings if "delete_version_after is set" in text] == ["FAIL"]
