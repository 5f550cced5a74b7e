"""Attacks on the OpenBao keyring that still work: each test passes while the flaw is there (docs/openbao.md,
threat_model.md "OpenBao as the keyring" promise otherwise)."""

from __future__ import annotations

import uuid

import pytest

from keys.errors import KeyUnavailable
from keys.keyring.edge import KeyringEdge
from keys.keyring.memory import trial_keyring
from keys.keyring.owner_marks import OwnerMarks
from keys.ledger import DeletionLedgers
from keys.openbao.doctor import report
from tests.support.openbao_fixtures import openbao_keyring_for

VAULT_ID = bytes(range(16))


@pytest.mark.parametrize("planted", ["99999999999", "2147483648", "x1"])
def test_a_mark_planted_out_of_the_readers_range_is_written_over_by_the_next_raise(openbao_keyring, planted):
    """The merge counts a stored mark as the owner marks' reader does: a value the reader refuses (above
    MAX_VERSION, too long, not a number) never outranks a raise, so the next raise writes over it, as with a plain
    keyring, instead of every later raise failing closed."""
    service, owner = "scratchvault/" + VAULT_ID.hex() + "/owner-issued", uuid.uuid4().bytes
    openbao_keyring.secrets[(service, owner.hex())] = planted
    marks = OwnerMarks(KeyringEdge(openbao_keyring), VAULT_ID)
    assert marks.read("issued", owner) == 0
    marks.raise_to("issued", owner, 40)
    assert marks.read("issued", owner) == 40

    plain = trial_keyring()
    plain.set_password(service, owner.hex(), planted)
    healed = OwnerMarks(KeyringEdge(plain), VAULT_ID)
    healed.raise_to("issued", owner, 40)
    assert healed.read("issued", owner) == 40


def test_verification_without_bao_cacert_is_certifis_as_doctor_says(openbao_server, openbao_secret_id,
                                                                           monkeypatch):
    """Without BAO_CACERT the certificate is verified against certifi's bundle, as doctor says: OpenSSL's own
    pointer to the system store (SSL_CERT_FILE) and requests' (REQUESTS_CA_BUNDLE) are ignored, so a server signed
    by a CA installed in the system store fails to verify."""
    monkeypatch.setenv("SSL_CERT_FILE", openbao_server.cacert)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", openbao_server.cacert)
    keyring = openbao_keyring_for(openbao_server, openbao_secret_id, cacert=None)
    with pytest.raises(KeyUnavailable, match="did not verify"):
        keyring.get_password("scratchvault/probe/index", "index")
    assert "certifi" in report(keyring)[0][1]


def test_a_compromised_host_with_the_policy_moves_a_deletion_counter_back(openbao_server, openbao_keyring):
    """threat_model.md says marks and counters "never move back across machines" and that a compromised machine
    "gets the keys it reads": its token, with the same policy, also writes any mark or counter back (data
    ``update``, with or without check-and-set), so the keyring's count of deletes no longer catches a database put
    back to before them (adversary 2 with a compromised host)."""
    service, owner = "scratchvault/" + VAULT_ID.hex() + "/deletions", uuid.uuid4().bytes
    ledgers = DeletionLedgers(KeyringEdge(openbao_keyring), VAULT_ID)
    ledgers.record(owner, 7)
    other_host = openbao_keyring_for(openbao_server, openbao_keyring.config.secret_id_file,
                                     prefix=openbao_keyring.config.prefix)
    path = other_host.path(service, owner.hex())
    other_host.session.call("planted", lambda client: client.secrets.kv.v2.create_or_update_secret(
        path=path, secret={"password": "0"}, mount_point="scratchvault"))
    assert ledgers.counter(owner) == 0
