"""Doctor warns of a secret-id or token file that others on the machine can read."""

from __future__ import annotations

from pathlib import Path

from keys.openbao.doctor import report
from tests.support.openbao_fixtures import openbao_keyring_for


def test_doctor_warns_of_a_secret_id_file_anyone_on_the_machine_can_read(openbao_server, tmp_path):
    """docs/openbao.md asks for the secret id in a file readable by the service's user only: doctor warns of one
    that others can read (any local user could log in as this machine)."""
    secret = tmp_path / "secret-id"
    secret.write_text(Path(openbao_server.secret_id_file("world-readable")).read_text())
    secret.chmod(0o644)
    findings = report(openbao_keyring_for(openbao_server, str(secret)))
    assert [status for status, text in findings if "secret id file" in text] == ["warn"]
    secret.chmod(0o600)
    again = report(openbao_keyring_for(openbao_server, str(secret)))
    assert not [text for _, text in again if "secret id file" in text]
