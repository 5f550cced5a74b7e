"""Crashes on PostgreSQL. A client SIGKILLed while a large put's chunks are on their way: its transaction dies with
it, nothing of the put is readable or left behind, and another process's puts go on. The server SIGKILLed (the
postmaster and every process it started) while puts run, then started again with pg_ctl: every acknowledged put is
intact, a put in flight is wholly there or absent, and the same open Vault carries on, its pool reconnected.

Keys are in a FileKeyring (tests/support/file_keyring.py): the child process and this one share it. The server
test needs SCRATCHVAULT_TEST_PGDATA and SCRATCHVAULT_TEST_PGCTL (exported by the test command for its cluster) and
leaves the server running.
"""

from __future__ import annotations

import io
import math
import random
import secrets
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import pytest

from tests.support.file_keyring import FileKeyring
from tests.support.repository import calling, child_env
from tests.system.pg_hosts import admin, orphans, server_control, server_killed
from vault import Principal, StorageError, Vault

pytestmark = pytest.mark.postgres
ALICE, BOB, CAROL = Principal("alice"), Principal("bob"), Principal("carol")
CHUNK = 64 * 1024
BIG, PAUSE_AT = 16 << 20, 10 << 20  # a put of 256 chunks, paused once 160 were read (two flushes of 4 MiB sent)
CHILD = calling("tests.system.test_postgres_crash.killed_client_main")


class Trickle(io.RawIOBase):
    """``size`` seeded bytes as a binary stream that calls ``pause`` once ``pause_at`` bytes were read: by then the
    put has sealed and sent the chunks before that point, inside its open transaction."""

    def __init__(self, seed: int, size: int, pause_at: int, pause: Callable[[], None]) -> None:
        super().__init__()
        self.content = random.Random(seed).randbytes(size)
        self._read, self._pause_at, self._pause = 0, pause_at, pause

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:
        if self._read >= self._pause_at and self._pause is not None:
            pause, self._pause = self._pause, None
            pause()
        piece = self.content[self._read:self._read + len(buffer)]
        buffer[:len(piece)] = piece
        self._read += len(piece)
        return len(piece)


def killed_client_main() -> None:
    """argv: url keyring turn; puts BIG bytes as alice, prints "sending" half-way and waits there to be killed."""
    url, ring, turn = sys.argv[1:4]

    def pause() -> None:
        sys.stdout.write("sending\n")
        sys.stdout.flush()
        time.sleep(600)

    with Vault.open(url, keyring_backend=FileKeyring(ring)) as vault:
        vault.put(ALICE, turn, 1, "big", Trickle(1, BIG, PAUSE_AT, pause))


def owner_rows(url: str, row: str) -> int:
    """How many rows the owner of ``row`` has, as the database sees them."""
    with admin(url) as connection:
        return connection.execute("SELECT count(*) FROM rows WHERE owner_tag = (SELECT owner_tag FROM rows "
                                  "WHERE id = %s)", (bytes.fromhex(row),)).fetchone()[0]


def chunks_as_sized(url: str) -> dict[int, tuple[int, int]]:
    """Rows whose chunk count (the one a row holds, and those in chunks) is not what their size needs:
    {seq: (chunks, needed)}."""
    with admin(url) as connection:
        found = connection.execute("SELECT r.seq, r.size_bytes, count(c.idx) + count(r.chunk) FROM rows r "
                                   "LEFT JOIN chunks c ON c.seq = r.seq GROUP BY r.seq, r.size_bytes").fetchall()
    return {seq: (count, max(1, math.ceil(size / CHUNK))) for seq, size, count in found
            if count != max(1, math.ceil(size / CHUNK))}


def test_a_client_killed_while_sending_a_put_leaves_nothing_of_it(tmp_path, pg_schemas):
    url, ring = pg_schemas("client-kill"), FileKeyring(tmp_path / "ring.json")
    name = f"sv_killed_{secrets.token_hex(4)}"
    with Vault.open(url, keyring_backend=ring) as vault:
        kept = {vault.put(ALICE, "before", n, "x", f"alice {n}").id: (ALICE, f"alice {n}") for n in range(3)}
        child = subprocess.Popen([sys.executable, "-c", CHILD, f"{url}&application_name={name}", ring.path, "killed"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env())
        try:
            assert select.select([child.stdout], [], [], 60)[0], "the child never got half-way"
            assert child.stdout.readline() == "sending\n", child.stderr.read()[-2000:]
            with admin(url) as connection:
                backend = connection.execute("SELECT pid, state, backend_xid IS NOT NULL FROM pg_stat_activity "
                                             "WHERE application_name = %s", (name,)).fetchall()
            assert [row[1:] for row in backend] == [("idle in transaction", True)]  # its chunks sent, uncommitted
            # another process's puts go on meanwhile (another owner: no lock of the child's in their way)
            kept |= {vault.put(BOB, "during", n, "x", f"bob {n}").id: (BOB, f"bob {n}") for n in range(3)}
        finally:
            child.kill()
            child.wait(timeout=30)
            child.stdout.close()
            child.stderr.close()
        with admin(url) as connection:
            deadline = time.monotonic() + 30
            while connection.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (backend[0][0],)).fetchone():
                assert time.monotonic() < deadline, "the server never noticed the client was gone"
                time.sleep(0.05)
            assert connection.execute("SELECT count(*) FROM pg_locks WHERE pid = %s", backend[0][:1]).fetchone() == (0,)
            assert orphans(connection) == {"chunks": 0, "summaries": 0}
            assert connection.execute("SELECT count(chunk) + (SELECT count(*) FROM chunks) FROM rows"
                                      ).fetchone() == (len(kept),)
        after = vault.put(ALICE, "after", 1, "x", "alice again").id  # the owner's lock went with the dead transaction
        kept[after] = (ALICE, "alice again")
        assert vault.list_for_turn(ALICE, "killed") == []
        assert owner_rows(url, after) == 4  # three before, one after, none half-written
        assert {row: vault.get(who, row).content for row, (who, _) in kept.items()} == {
            row: text for row, (_, text) in kept.items()}


class Writer(threading.Thread):
    """Puts seeded binary rows (1 B .. 200 KB) of one owner in a loop until stopped; after a failure it waits for
    ``resume``. Each step's content is known, acknowledged or not."""

    def __init__(self, vault: Vault, who: Principal) -> None:
        super().__init__(daemon=True)
        self.vault, self.who, self.turn = vault, who, f"writer-{who.user_id}"
        self.acknowledged: dict[int, str] = {}
        self.failed: list[int] = []
        self.unexpected: list[BaseException] = []
        self.stop, self.resume = threading.Event(), threading.Event()

    def content(self, step: int) -> bytes:
        rng = random.Random(f"{self.turn}/{step}")
        return rng.randbytes(rng.randint(1, 200_000))

    def run(self) -> None:
        step = 0
        while not self.stop.is_set():
            try:
                self.acknowledged[step] = self.vault.put(self.who, self.turn, step, "w", self.content(step)).id
            except StorageError:  # the server is away: wait to be told it is back (see the server test)
                self.failed.append(step)
                self.resume.wait(60)
            except BaseException as error:  # anything but a StorageError while the server is away is a bug
                self.unexpected.append(error)
                return
            step += 1

    def wait_for(self, count: int) -> None:
        deadline = time.monotonic() + 60
        while len(self.acknowledged) < count and not self.unexpected:
            assert time.monotonic() < deadline, f"{self.turn}: {len(self.acknowledged)} puts, {self.failed[-3:]}"
            time.sleep(0.02)


def grow_pool(vault: Vault, row: str, url: str, name: str, size: int) -> None:
    """Reads from several threads at once until the vault's pool holds ``size`` connections (they stay, idle)."""
    deadline = time.monotonic() + 30
    with admin(url) as connection:
        while connection.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                                 (name,)).fetchone()[0] < size:
            assert time.monotonic() < deadline, "the pool never grew"
            readers = [threading.Thread(target=lambda: [vault.get(ALICE, row) for _ in range(20)]) for _ in range(size)]
            for reader in readers:
                reader.start()
            for reader in readers:
                reader.join()


def test_the_server_killed_mid_put_keeps_every_acknowledged_put_and_the_open_vault_recovers(tmp_path, pg_schemas):
    data, pg_ctl = server_control()
    name = f"sv_restart_{secrets.token_hex(4)}"
    url = f"{pg_schemas('server-kill')}&application_name={name}"
    sending, killed, outcome = threading.Event(), threading.Event(), []

    def pause() -> None:
        sending.set()
        killed.wait(60)

    def big_put() -> None:
        try:
            outcome.append(vault.put(CAROL, "big", 1, "big", Trickle(2, BIG, PAUSE_AT, pause)).id)
        except BaseException as error:
            outcome.append(error)

    with Vault.open(url, keyring_backend=FileKeyring(tmp_path / "ring.json")) as vault:
        first = vault.put(ALICE, "first", 1, "x", "acknowledged first").id
        grow_pool(vault, first, url, name, 6)  # idle connections the kill breaks: the first call below meets one
        writers = [Writer(vault, who) for who in (ALICE, BOB)]
        for thread in (*writers, threading.Thread(target=big_put, daemon=True)):
            thread.start()
        for writer in writers:
            writer.wait_for(5)
        assert sending.wait(60), "the big put never got half-way"
        acknowledged_before = {writer.turn: dict(writer.acknowledged) for writer in writers}
        with server_killed(data, pg_ctl, tmp_path / "pg-restart.log"):
            killed.set()  # the big put goes on reading: its next flush meets the dead connection
        assert vault.get(ALICE, first).content == "acknowledged first"  # the same Vault, its pool reconnected
        for writer in writers:
            writer.resume.set()
            writer.wait_for(len(writer.acknowledged) + 3)
            writer.stop.set()
        for writer in writers:
            writer.join(timeout=60)
            assert not writer.unexpected, writer.unexpected
        assert len(outcome) == 1 and isinstance(outcome[0], StorageError), outcome  # it could not commit
        assert vault.list_for_turn(CAROL, "big") == []
        for writer in writers:
            assert acknowledged_before[writer.turn].items() <= writer.acknowledged.items()
            listed = {rep.id: rep.step_num for rep in vault.list_for_turn(writer.who, writer.turn)}
            assert set(writer.acknowledged.values()) <= set(listed), f"{writer.turn}: acknowledged rows lost"
            assert set(listed.values()) <= set(writer.acknowledged) | set(writer.failed)
            for row, step in listed.items():  # acknowledged, or committed as the kill came: whole either way
                assert vault.get(writer.who, row).content == writer.content(step), f"{writer.turn} step {step}"
        with admin(url) as connection:
            assert orphans(connection) == {"chunks": 0, "summaries": 0}
        assert chunks_as_sized(url) == {}
