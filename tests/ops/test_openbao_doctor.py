"""``scratchvault doctor`` with the OpenBao keyring: reachable and unsealed, version, TLS, the token's time left and
renewability, its capabilities on the vault's paths (exactly the policy's; more warns, fewer fails), the KV engine,
the audit device."""

from __future__ import annotations

import keyring.core

from keys.openbao.doctor import report
from tests.support.openbao_fixtures import openbao_keyring_for
from vault.ops.doctor import diagnose


def statuses(findings, word):
    return [status for status, text in findings if word in text]


def test_an_approle_token_with_the_policy_is_reported_exact(openbao_keyring):
    findings = report(openbao_keyring)
    texts = "\n".join(text for _, text in findings)
    assert "reachable, unsealed, active" in texts and "OpenBao 2." in texts
    assert "TLS verified against" in texts
    assert statuses(findings, "token (approle)") == ["ok"] and "renewable" in texts
    assert statuses(findings, "exactly") == ["ok", "ok"]
    assert statuses(findings, "KV mount scratchvault: version 2") == ["warn"]  # its settings: not for this token
    assert statuses(findings, "audit devices") == ["warn"]  # not visible to the vault's own token


def test_a_root_token_is_more_than_needed_and_sees_the_audit_device(openbao_server, openbao_secret_id):
    keyring = openbao_keyring_for(openbao_server, None, role_id=None, token=openbao_server.root_token)
    findings = report(keyring)
    assert statuses(findings, "more than needed") == ["warn", "warn"]
    assert statuses(findings, "never expires") == ["warn"]
    assert ("ok", "audit devices: file/") in findings
    assert openbao_server.root_token not in repr(findings)


def test_a_token_missing_a_capability_fails(openbao_server):
    admin = openbao_server.admin()
    admin.sys.create_or_update_policy("doctor-no-delete",
                                      'path "scratchvault/data/*" { capabilities = ["create", "read", "update"] }')
    token = admin.auth.token.create(policies=["doctor-no-delete"], ttl="10m", renewable=False)["auth"]["client_token"]
    findings = report(openbao_keyring_for(openbao_server, None, role_id=None, token=token, prefix=""))
    assert statuses(findings, "missing ['delete', 'list']") == ["FAIL"]
    assert token not in repr(findings)


def test_an_unreachable_server_fails_with_a_remedy(openbao_server, openbao_secret_id):
    findings = report(openbao_keyring_for(openbao_server, openbao_secret_id, addr="https://127.0.0.1:9"))
    assert findings[-1][0] == "FAIL" and "could not be reached" in findings[-1][1]


def test_plain_http_on_loopback_is_a_warning(openbao_server, openbao_secret_id):
    findings = report(openbao_keyring_for(openbao_server, openbao_secret_id, addr="http://127.0.0.1:9"))
    assert findings[0] == ("warn", "OpenBao at http://127.0.0.1:9: plain http, accepted only because 127.0.0.1 is "
                                   "a literal loopback address (127.0.0.0/8 or ::1; a name such as localhost is "
                                   "refused)")


def test_the_doctor_command_reports_the_backend_chosen_by_python_keyring_backend(
        openbao_server, openbao_secret_id, monkeypatch, tmp_path):
    monkeypatch.setattr(keyring.core, "_keyring_backend", None)  # keyring loads its backend again, by name
    for name, value in (("PYTHON_KEYRING_BACKEND", "keys.openbao.OpenBaoKeyring"), ("BAO_ADDR", openbao_server.addr),
                        ("BAO_CACERT", openbao_server.cacert), ("SCRATCHVAULT_OPENBAO_ROLE_ID", openbao_server.role_id),
                        ("SCRATCHVAULT_OPENBAO_SECRET_ID_FILE", openbao_secret_id)):
        monkeypatch.setenv(name, value)
    lines, _ = diagnose(tmp_path / "absent.db")
    assert any(line.startswith("ok    token capabilities on scratchvault/data/") for line in lines)
    assert any(line.startswith("ok    OpenBao 2.") for line in lines)
