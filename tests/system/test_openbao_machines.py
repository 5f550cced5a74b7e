"""Two machines, one PostgreSQL database and one OpenBao, set up as docs/openbao.md says step by step: each a process
of its own with its own HOME, no D-Bus session and no Secret Service, logged in with its own AppRole secret id, its
keyring chosen by PYTHON_KEYRING_BACKEND. A row put on one is read on the other; a shred on one makes both refuse
the owner's rows and leaves no key of that owner in OpenBao; an epoch ended and gc'd on one leaves no copy
readable on the other or from a backup."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest

from keys.openbao.policy import policy_hcl
from tests.support.epochs import SKEW, E
from tests.support.openbao_fixtures import ServerEntries
from tests.support.repository import ROOT
from vault import storage

T0 = 1_800_000_000.0


class Machine:
    def __init__(self, name: str, env: dict[str, str], location: str) -> None:
        self.name, self.env, self.location = name, env, location

    def run(self, now: float, op: str, *args: object, location: str | None = None) -> dict:
        done = subprocess.run([sys.executable, "-m", "tests.system.openbao_machine", location or self.location,
                               str(now), op, *map(str, args)], env=self.env, cwd=ROOT, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, f"{self.name}: {done.stderr[-2000:]}"
        return json.loads(done.stdout)


@pytest.fixture
def machines(openbao_server, pg_schemas, tmp_path):
    admin = openbao_server.admin()
    prefix = f"machines-{uuid.uuid4().hex[:8]}"
    # docs/openbao.md, set-up step 3: the policy and the role (the mount and AppRole the server already has)
    admin.sys.create_or_update_policy(prefix, policy_hcl("scratchvault", prefix))
    admin.auth.approle.create_or_update_approle(prefix, token_policies=[prefix], token_ttl="20m",
                                                token_max_ttl="2h", secret_id_num_uses=0, secret_id_ttl="720h")
    role_id = admin.auth.approle.read_role_id(prefix)["data"]["role_id"]
    made = []
    for name in ("a", "b"):
        home = tmp_path / f"home-{name}"
        home.mkdir(mode=0o700)
        secret = home / "secret-id"  # step 4: each machine its own secret id, mode 0600
        secret.write_text(admin.auth.approle.generate_secret_id(prefix)["data"]["secret_id"])
        secret.chmod(0o600)
        env = {"PATH": os.environ["PATH"], "HOME": str(home), "PYTHONPATH": str(ROOT),  # step 5; no D-Bus
               "BAO_ADDR": openbao_server.addr, "BAO_CACERT": openbao_server.cacert,
               "SCRATCHVAULT_OPENBAO_ROLE_ID": role_id, "SCRATCHVAULT_OPENBAO_SECRET_ID_FILE": str(secret),
               "SCRATCHVAULT_OPENBAO_PREFIX": prefix, "PYTHON_KEYRING_BACKEND": "keys.openbao.OpenBaoKeyring"}
        made.append(Machine(name, env, pg_schemas("vault")))
    return made[0], made[1], ServerEntries(openbao_server, prefix)


def owner_keys(entries: ServerEntries) -> list[tuple[str, str]]:
    return [(service, user) for service, user in entries if service.endswith("/owner-key")]


def test_two_machines_share_rows_and_a_shred_on_one_is_final_for_both(machines):
    a, b, entries = machines
    alice, bob = f"alice-{uuid.uuid4().hex[:6]}", f"bob-{uuid.uuid4().hex[:6]}"
    row = a.run(T0, "put", alice, "written on a", 86400)["id"]
    kept = b.run(T0, "put", bob, "written on b", 86400)["id"]
    assert b.run(T0, "get", alice, row) == {"content": "written on a"}
    assert a.run(T0, "get", bob, kept) == {"content": "written on b"}
    before = owner_keys(entries)
    assert len(before) == 2
    a.run(T0, "shred", alice)
    assert b.run(T0, "get", alice, row) == {"error": "NotFound"}
    assert a.run(T0, "get", alice, row) == {"error": "NotFound"}
    left = owner_keys(entries)
    assert len(left) == 1 and left[0] in before, "the shredded owner's key is still in OpenBao"
    assert b.run(T0, "get", bob, kept) == {"content": "written on b"}


def test_an_epoch_ended_on_one_machine_is_unreadable_on_the_other_and_in_a_backup(machines, pg_schemas):
    a, b, entries = machines
    alice = f"alice-{uuid.uuid4().hex[:6]}"
    row = a.run(T0, "put", alice, "short lived", 600)["id"]
    assert b.run(T0, "get", alice, row) == {"content": "short lived"}
    backup = pg_schemas("backup")
    storage.backup(a.location, backup)
    epoch_keys = [user for service, user in entries if service.endswith("/epoch-key") and "through" not in user]
    assert len(epoch_keys) == 1
    ended = (int(T0 + 600) // E + 1) * E + SKEW
    assert a.run(ended, "gc") == {"collected": 1}
    assert [user for service, user in entries if user in epoch_keys] == [], "the ended epoch's key is in OpenBao"
    assert b.run(ended, "get", alice, row) == {"error": "NotFound"}
    for now in (T0, ended):  # the backup, with the clock by the copy and by the wall
        assert "content" not in b.run(now, "get", alice, row, location=backup)
