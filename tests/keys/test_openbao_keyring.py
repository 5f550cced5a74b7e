"""The OpenBao keyring against a real server: the vault contract, then what this backend promises itself (final
deletion, write-once entries, one folder per owner, TLS, no token in errors or reprs, chosen only by name)."""

from __future__ import annotations

import contextlib
import pickle

import keyring.core
import pytest
from hvac import exceptions as bao_errors
from keyring.errors import PasswordDeleteError
from keyring.testing.backend import BackendBasicTests

from keys.errors import KeyUnavailable
from keys.openbao import OpenBaoConfig, OpenBaoKeyring
from keys.openbao.layout import entry_path
from tests.keys.test_keyring_contract import VaultContract
from tests.support.openbao_fixtures import openbao_keyring_for
from vault import Principal, Vault

OWNER_KEY = "scratchvault/" + "ab" * 16 + "/owner-key"
MARKS = "scratchvault/" + "ab" * 16 + "/owner-issued"


class TestVaultContractOnOpenBao(VaultContract):
    @pytest.fixture
    def backend(self, openbao_keyring):
        return openbao_keyring


def test_a_deleted_entry_leaves_no_version_or_metadata_to_undelete(openbao_keyring, openbao_server):
    openbao_keyring.set_password(MARKS, "cd", "1")
    openbao_keyring.set_password(MARKS, "cd", "2")  # two versions
    openbao_keyring.delete_password(MARKS, "cd")
    kv = openbao_server.admin().secrets.kv.v2
    path = entry_path(openbao_keyring.config.prefix, MARKS, "cd")
    with pytest.raises(bao_errors.InvalidPath):
        kv.read_secret_metadata(path=path, mount_point="scratchvault")
    with contextlib.suppress(bao_errors.VaultError):
        kv.undelete_secret_versions(path=path, versions=[1, 2], mount_point="scratchvault")
    for version in (1, 2):  # the root token's undelete brought nothing back
        with pytest.raises(bao_errors.InvalidPath):
            kv.read_secret_version(path=path, version=version, mount_point="scratchvault",
                                   raise_on_deleted_version=True)
    assert openbao_keyring.get_password(MARKS, "cd") is None
    with pytest.raises(PasswordDeleteError):
        openbao_keyring.delete_password(MARKS, "cd")


def test_an_owner_key_version_is_written_once_by_the_servers_check_and_set(openbao_keyring):
    openbao_keyring.set_password(OWNER_KEY, "cd.1", "first")
    with pytest.raises(KeyUnavailable, match="written once"):
        openbao_keyring.set_password(OWNER_KEY, "cd.1", "second")
    assert openbao_keyring.get_password(OWNER_KEY, "cd.1") == "first"
    openbao_keyring.set_password(MARKS, "cd", "1")
    openbao_keyring.set_password(MARKS, "cd", "2")  # a mark is raised in place
    assert openbao_keyring.get_password(MARKS, "cd") == "2"


def test_an_owners_versions_share_one_folder_of_their_own(openbao_keyring):
    prefix = openbao_keyring.config.prefix
    for version in (1, 2, 3):
        openbao_keyring.set_password(OWNER_KEY, f"cd.{version}", "k")
    openbao_keyring.set_password(OWNER_KEY, "ef.1", "k")
    assert openbao_keyring.secrets.paths(f"{prefix}/{OWNER_KEY}/cd") == [
        f"{prefix}/{OWNER_KEY}/cd/cd.{version}" for version in (1, 2, 3)]


def test_entry_names_cannot_climb_out_of_their_folder(openbao_keyring):
    openbao_keyring.set_password("scratchvault/x/../y", "../..", "v")
    assert openbao_keyring.get_password("scratchvault/x/../y", "../..") == "v"
    assert openbao_keyring.get_password("scratchvault/y", "../..") is None
    assert set(openbao_keyring.secrets) == {("scratchvault/x/../y", "../..")}


def test_a_kv_version_1_mount_is_refused_and_the_token_is_in_no_repr_error_or_pickle(openbao_server):
    token = openbao_server.root_token
    admin = openbao_server.admin()
    if "kv-one/" not in admin.sys.list_mounted_secrets_engines()["data"]:
        admin.sys.enable_secrets_engine("kv", path="kv-one", options={"version": "1"})
    keyring = OpenBaoKeyring(addr=openbao_server.addr, cacert=openbao_server.cacert, token=token, role_id=None,
                             secret_id_file=None, token_file=None, mount="kv-one")
    assert token not in repr(keyring) and token not in repr(keyring.config) and token not in repr(keyring.session)
    with pytest.raises(KeyUnavailable) as error:
        keyring.set_password(OWNER_KEY, "cd.1", "never written")
    assert "not a KV version 2" in str(error.value) and token not in str(error.value)
    assert admin.list(f"kv-one/data/{OWNER_KEY}") is None  # nothing was written
    with pytest.raises(TypeError):
        pickle.dumps(keyring)


def test_an_unknown_ca_fails_closed_with_a_remedy(openbao_server, openbao_secret_id, tmp_path):
    keyring = openbao_keyring_for(openbao_server, openbao_secret_id, cacert=None)  # the system CAs
    with pytest.raises(KeyUnavailable, match="BAO_CACERT"):
        keyring.get_password(OWNER_KEY, "cd.1")


@pytest.mark.parametrize("addr", ["http://10.0.0.5:8200", "http://bao.example:8200", "ftp://127.0.0.1",
                                  "http://localhost:8200", "http://localhost.:8200", "http://[::ffff:10.0.0.5]:8200"])
def test_plain_http_is_refused_off_a_literal_loopback_address(addr):
    with pytest.raises(KeyUnavailable, match="https"):
        OpenBaoConfig(addr=addr, token="t")


@pytest.mark.parametrize("addr", ["http://127.0.0.1:8200", "http://127.9.8.7:8200", "http://[::1]:8200"])
def test_plain_http_to_a_literal_loopback_address_is_accepted(addr):
    assert OpenBaoConfig(addr=addr, token="t").addr == addr


def test_the_environment_configures_it_and_arguments_override(monkeypatch):
    monkeypatch.setenv("BAO_ADDR", "https://bao.example:8200")
    monkeypatch.setenv("VAULT_ADDR", "https://ignored.example")
    monkeypatch.setenv("BAO_TOKEN", "s.env")
    monkeypatch.setenv("SCRATCHVAULT_OPENBAO_PREFIX", "team")
    config = OpenBaoConfig.from_env()
    assert (config.addr, config.token, config.prefix, config.mount) == ("https://bao.example:8200", "s.env", "team",
                                                                       "scratchvault")
    assert OpenBaoKeyring(prefix="other").config.prefix == "other"
    with pytest.raises(TypeError):
        OpenBaoConfig.from_env(tokn="x")


def test_it_is_never_auto_selected_unless_named(monkeypatch):
    monkeypatch.delenv("PYTHON_KEYRING_BACKEND", raising=False)
    with pytest.raises(RuntimeError):
        OpenBaoKeyring.priority
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keys.openbao.OpenBaoKeyring")
    assert OpenBaoKeyring.priority == 1


def test_python_keyring_backend_selects_it_for_vault_open(openbao_server, openbao_secret_id, monkeypatch, tmp_path,
                                                          clock):
    monkeypatch.setattr(keyring.core, "_keyring_backend", None)  # keyring loads its backend again, by name
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keys.openbao.OpenBaoKeyring")
    for name, value in (("BAO_ADDR", openbao_server.addr), ("BAO_CACERT", openbao_server.cacert),
                        ("SCRATCHVAULT_OPENBAO_ROLE_ID", openbao_server.role_id),
                        ("SCRATCHVAULT_OPENBAO_SECRET_ID_FILE", openbao_secret_id),
                        ("SCRATCHVAULT_OPENBAO_PREFIX", "env-selected")):
        monkeypatch.setenv(name, value)
    alice = Principal("alice")
    with Vault.open(tmp_path / "v.db", clock=clock) as vault:
        row = vault.put(alice, "t", 1, "tool", "kept in OpenBao").id
        assert vault.get(alice, row).content == "kept in OpenBao"
    ring = openbao_keyring_for(openbao_server, openbao_secret_id, prefix="env-selected")
    assert any(service.endswith("/index") for service, _ in ring.secrets)


def test_the_documented_policy_is_the_one_the_servers_here_use():
    from keys.openbao.policy import policy_hcl
    from tests.support.repository import ROOT

    assert policy_hcl() in (ROOT / "docs" / "openbao.md").read_text()


def test_neither_token_nor_secret_id_reaches_a_log_line(openbao_server, openbao_secret_id, caplog, tmp_path, clock):
    import logging
    from pathlib import Path

    caplog.set_level(logging.DEBUG)  # every logger: urllib3's request lines, hvac's, ours
    keyring = openbao_keyring_for(openbao_server, openbao_secret_id)
    with Vault.open(tmp_path / "v.db", keyring_backend=keyring, clock=clock) as vault:
        alice = Principal("alice")
        vault.put(alice, "t", 1, "tool", "logged?")
        vault.shred_owner(alice.user_id)
    token, secret_id = keyring.session._client.token, Path(openbao_secret_id).read_text()
    assert token and caplog.records, "nothing was logged: the check would be empty"
    assert token not in caplog.text and secret_id not in caplog.text


def test_chosen_by_name_without_an_address_vault_open_says_what_to_set(monkeypatch, tmp_path, clock):
    from vault import KeyUnavailable as VaultKeyUnavailable

    monkeypatch.setattr(keyring.core, "_keyring_backend", None)  # keyring loads its backend again, by name
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keys.openbao.OpenBaoKeyring")
    for name in ("BAO_ADDR", "VAULT_ADDR"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(VaultKeyUnavailable, match="set BAO_ADDR"):
        Vault.open(tmp_path / "v.db", clock=clock)


class TestKeyringsOwnContract(BackendBasicTests):
    """jaraco/keyring's own contract for any backend: unicode, difficult characters, empty user names, deletes."""

    @pytest.fixture(autouse=True)
    def _init_properties(self, request, openbao_server, openbao_secret_id):
        self._made_by = (openbao_server, openbao_secret_id)
        self.keyring = self.init_keyring()
        self.credentials_created = set()
        request.addfinalizer(self.cleanup)

    def init_keyring(self):
        return openbao_keyring_for(*self._made_by)
