"""Several machines (and threads) on one OpenBao: a mark or counter read and raised by two machines at once never
moves back and no update is lost (check-and-set, the write re-applied over the other's); the epoch lengths list
keeps both machines' lengths; the key layer takes a mark another machine raised higher meanwhile as raised; threads
refused at once (403) log in once, not each; a mount that requires check-and-set is served as any other."""

from __future__ import annotations

import threading
import uuid

import pytest

from keys.epochs.lengths import EpochLengths
from keys.epochs.marks import EpochMark
from keys.keyring.edge import KeyringEdge
from keys.keyring.owner_marks import OwnerMarks
from keys.ledger import DeletionLedgers
from keys.openbao import OpenBaoKeyring
from tests.support.openbao_fixtures import ObservedOpenBaoKeyring, kv2_mount, openbao_keyring_for
from vault import Principal, Vault

VAULT = "scratchvault/" + "ab" * 16
DELETIONS, ISSUED, LENGTHS = VAULT + "/deletions", VAULT + "/owner-issued", VAULT + "/epoch-lengths"


@pytest.fixture
def two_machines(openbao_server):
    """Two keyrings, each logged in with its own secret id, sharing one prefix: two machines of one vault."""
    first = openbao_keyring_for(openbao_server, openbao_server.secret_id_file(f"m1-{uuid.uuid4().hex[:6]}"))
    second = openbao_keyring_for(openbao_server, openbao_server.secret_id_file(f"m2-{uuid.uuid4().hex[:6]}"),
                                 prefix=first.config.prefix)
    return first, second


def test_a_mark_raised_on_two_machines_at_once_never_moves_back(two_machines):
    first, second = two_machines
    first.set_password(ISSUED, "cd", "5")
    seen = int(first.get_password(ISSUED, "cd"))  # the first machine reads 5 ...
    second.set_password(ISSUED, "cd", "7")  # ... the second raises it to 7 ...
    first.set_password(ISSUED, "cd", str(seen + 1))  # ... the first writes what its read gave it
    assert first.get_password(ISSUED, "cd") == second.get_password(ISSUED, "cd") == "7"
    first.set_password(ISSUED, "cd", "9")
    assert second.get_password(ISSUED, "cd") == "9"


def test_the_epoch_lengths_list_keeps_both_machines_lengths(two_machines):
    first, second = two_machines
    first.set_password(LENGTHS, "lengths", "60")
    listed = first.get_password(LENGTHS, "lengths")
    second.set_password(LENGTHS, "lengths", "60,3600")
    first.set_password(LENGTHS, "lengths", f"{listed},120")
    assert second.get_password(LENGTHS, "lengths") == "60,120,3600"


def test_counters_raised_by_threads_on_two_machines_end_at_the_highest_and_never_go_back(two_machines):
    first, second = two_machines
    writers = [(machine, start) for machine in two_machines for start in (1, 2)]  # four writers, interleaved values
    highest = 4 * 12
    seen: list[int] = []
    done = threading.Event()
    failures: list[BaseException] = []

    def raise_counter(machine, start):
        try:
            for value in range(start, highest + 1, 4 if start % 2 else 2):
                machine.set_password(DELETIONS, "cd", str(value))
        except BaseException as error:
            failures.append(error)

    def watch():
        while not done.is_set():
            value = second.get_password(DELETIONS, "cd")
            if value is not None:
                seen.append(int(value))

    watcher = threading.Thread(target=watch)
    watcher.start()
    threads = [threading.Thread(target=raise_counter, args=writer) for writer in writers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    done.set()
    watcher.join()
    assert failures == []
    assert first.get_password(DELETIONS, "cd") == str(highest)
    assert seen == sorted(seen), "a counter went backwards"


def test_threads_refused_at_once_log_in_again_once(openbao_server, tmp_path):
    admin = openbao_server.admin()
    admin.auth.approle.create_or_update_approle("two-uses", token_policies=["scratchvault"], token_ttl="20m",
                                                secret_id_num_uses=2)
    secret = tmp_path / "two-uses"
    secret.write_text(admin.auth.approle.generate_secret_id("two-uses")["data"]["secret_id"])
    role = admin.auth.approle.read_role_id("two-uses")["data"]["role_id"]
    keyring = openbao_keyring_for(openbao_server, str(secret), role_id=role)
    keyring.set_password(ISSUED, "cd", "1")  # the first login: one use of two left
    admin.auth.token.revoke(keyring.session._client.token)
    start, read, failed = threading.Barrier(8), [], []

    def read_mark():
        start.wait()
        try:
            read.append(keyring.get_password(ISSUED, "cd"))
        except Exception as error:
            failed.append(error)

    threads = [threading.Thread(target=read_mark) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failed == [] and read == ["1"] * 8  # a second re-login would have found the secret id used up


def test_a_mount_that_requires_check_and_set_is_served(openbao_server, tmp_path, clock):
    kv2_mount(openbao_server, "kv-cas", cas_required=True)
    keyring = openbao_keyring_for(openbao_server, None, role_id=None, token=openbao_server.root_token,
                                  mount="kv-cas")
    keyring.set_password(ISSUED, "cd", "1")
    keyring.set_password(ISSUED, "cd", "2")
    keyring.set_password("some/service", "user", "a")
    keyring.set_password("some/service", "user", "b")
    assert (keyring.get_password(ISSUED, "cd"), keyring.get_password("some/service", "user")) == ("2", "b")
    alice = Principal("alice")
    with Vault.open(tmp_path / "v.db", keyring_backend=keyring, clock=clock) as vault:
        row = vault.put(alice, "t", 1, "tool", "on a cas_required mount").id
        assert vault.get(alice, row).content == "on a cas_required mount"
        vault.shred_owner(alice.user_id)


class OvertakenKeyring(ObservedOpenBaoKeyring):
    """A machine whose next write is overtaken: just before it reaches the server, another machine (a second real
    keyring, its own login) writes the same entry, as when the two run at once."""

    rival: OpenBaoKeyring
    rival_writes: list[str]

    def set_password(self, service: str, username: str, password: str) -> None:
        if self.rival_writes:
            self.rival.set_password(service, username, self.rival_writes.pop())
        super().set_password(service, username, password)


def test_the_key_layers_marks_and_counters_raised_on_two_machines_at_once_keep_the_higher(openbao_server):
    rival = openbao_keyring_for(openbao_server, openbao_server.secret_id_file(f"m2-{uuid.uuid4().hex[:6]}"))
    machine = OvertakenKeyring(openbao_server, addr=openbao_server.addr, cacert=openbao_server.cacert,
                               role_id=openbao_server.role_id, token=None, token_file=None,
                               secret_id_file=openbao_server.secret_id_file(f"m1-{uuid.uuid4().hex[:6]}"),
                               prefix=rival.config.prefix)
    machine.rival, machine.rival_writes = rival, []
    vault_id, owner_tag = bytes(16), b"\xcd" * 16
    marks, ledgers = OwnerMarks(KeyringEdge(machine), vault_id), DeletionLedgers(KeyringEdge(machine), vault_id)
    epochs = EpochMark(KeyringEdge(machine), "scratchvault/" + vault_id.hex() + "/epoch-key")
    marks.raise_to("issued", owner_tag, 5)
    machine.rival_writes = ["7"]
    marks.raise_to("issued", owner_tag, 6)  # read 5, then the rival raised it to 7 before this write
    assert marks.read("issued", owner_tag) == 7
    ledgers.record(owner_tag, 3)
    machine.rival_writes = ["9"]
    ledgers.record(owner_tag, 4)
    assert ledgers.counter(owner_tag) == 9
    machine.rival_writes = ["12"]
    assert epochs.raise_to(60, 11) and epochs.read(60) == 12
    lengths = EpochLengths(KeyringEdge(machine), "scratchvault/" + vault_id.hex() + "/epoch-key")
    machine.rival_writes = ["60,3600"]
    lengths.before_key(120, 1)  # read no list, then the rival listed 60 and 3600 before this write
    assert rival.get_password("scratchvault/" + vault_id.hex() + "/epoch-lengths", "lengths") == "60,120,3600"
