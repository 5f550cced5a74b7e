"""gc, shred_owner, delete, rotate_owner_key, extend_turn and rewrap, each SIGKILLed at 24 points (10 on PostgreSQL)
spread over its own duration (timed from the moment it starts, not from process start) on a copy of a
pre-populated vault; the machinery is in tests/system/crash_campaign.py and crash_ops.py.

After every kill (on PostgreSQL, once the killed worker's server session has ended: it may still commit what it
sent): the store's integrity check passes (SQLite's, or amcheck's); every row has its summary and all its chunks
and nothing is orphaned (never half a row); every row the operation must not remove reads back with identical
content, and the rows it must not change are byte for byte the template's; no deleted, collected or shredded row
is readable; then the operation, or the interrupted step, runs again in this process and must complete. What
"complete" means, and what each operation may leave half-done, is in each test. A row gone from the store is gone
for every reader; the API is asked for a fresh random ``SAMPLE`` of them after each kill, and for a shredded
owner's remaining rows (each needing its ~0.4 ms keyring round trip) a tenth of that.

Each operation lasts ~50-100 ms here: a full check reads every row, which costs several times what the
operation spends on it, and six campaigns must stay near a minute. Kills land within ~0.2 ms of their planned
moment, so 24 points over that span are distinct. Delete and rotation take a few ms per call, so their workload
is a run of calls (one row, one owner each). On PostgreSQL every row costs several times more to put, check and
read back (round trips to the server), so its workloads are smaller, in smaller batches, and last ~20-100 ms.
``pytest -s`` prints one line of figures per operation.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.attacks.stores import STORE
from tests.support.clock import FakeClock
from tests.support.file_keyring import load
from tests.system.crash_campaign import (
    SAMPLE,
    Group,
    Layout,
    Template,
    campaign,
    ids_of,
    last_ack,
    portion,
    read_back,
    seed,
    unreadable,
)
from tests.system.crash_ops import Run, Zygote
from vault import KeyUnavailable, NotFound, Principal

if STORE == "postgres":  # a row costs ~1 ms to put, ~0.7 ms to read back, ~0.9 ms to collect early (gc(now) in
    # the checks) over round trips to the server: fewer rows, and smaller gc, shred and rewrap batches, so that each
    # operation still commits several (KILLS is smaller there too: crash_campaign.py)
    BYSTANDER_ROWS, EXPIRED, VICTIM_ROWS, DELETES, ROTATIONS, EXTENDED, REWRAPPED = 10, 480, 480, 10, 8, 200, 160
    BATCHES, REWRAP_ARGS = {"GC_BATCH": 60}, {"batch": 40}  # the workers' batch sizes
else:
    BYSTANDER_ROWS, EXPIRED, VICTIM_ROWS, DELETES, ROTATIONS, EXTENDED, REWRAPPED = 25, 8000, 4000, 40, 32, 1500, 2000
    BATCHES, REWRAP_ARGS = {}, {}  # the store's own
BYSTANDERS = [Group(f"bystander-{k}", "t", BYSTANDER_ROWS, multi_every=8) for k in range(4)]  # no operation's


@pytest.fixture
def zygote(tmp_path: Path) -> Iterator[Zygote]:
    forker = Zygote(tmp_path / "zygote-stderr.txt", BATCHES)
    yield forker
    forker.close()


@pytest.fixture
def template(tmp_path: Path, attacker_for) -> Iterator[Template]:
    """An empty template of the store under test, in a RAM file system when there is one: populating a SQLite file
    is thousands of committed puts, each an fsync, which cost next to nothing there. The kills run on copies in
    ``tmp_path``, on disk (on PostgreSQL: a copied schema each, dropped after its check)."""
    ram = Path("/dev/shm")
    base = Path(tempfile.mkdtemp(dir=ram)) if ram.is_dir() and os.access(ram, os.W_OK) else tmp_path
    directory = base / "template"
    directory.mkdir(mode=0o700)
    yield Template(directory, attacker_for)
    attacker_for.discard(base)
    if base != tmp_path:
        shutil.rmtree(base)


@pytest.mark.slow
def test_gc_killed_anywhere_leaves_live_rows_whole_and_each_expired_row_whole_or_gone(zygote, template, tmp_path,
                                                                                     attacker_for):
    past = time.time() - 7200  # the expired rows were put two hours ago with ten minutes to live
    template.populate([*BYSTANDERS, *(Group(f"gc-{k}", "old", EXPIRED // 4, ttl=600, multi_every=100)
                                      for k in range(4))], clock=FakeClock(past))
    layout = Layout(attacker_for, template)
    expired = set(ids_of(template, turn="old"))
    live = set(template.rows) - expired

    def check(copy: Template, run: Run) -> str:
        present = layout(copy, untouched=template.rows)
        assert live <= present, "gc removed a live row"
        collected = expired - present
        assert len(collected) >= last_ack(run), "a batch gc reported as committed is not"
        assert run.end is None or not expired & present, "the un-killed gc left expired rows"
        with copy.open(FakeClock(past + 1)) as vault:  # a clock under which every row is live
            read_back(vault, copy, live)
            unreadable(vault, copy, collected, NotFound, sample=SAMPLE)  # the file holds none of them: above
            assert vault.gc(now=time.time()) == len(expired & present)  # run again, it collects the rest
        assert layout(copy) == live
        with copy.open() as vault:
            read_back(vault, copy, live)
        return portion(collected, expired, "expired rows collected")

    figures = campaign(zygote, template, "gc", {}, check, tmp_path, seed())
    assert figures.full_acks[-1] == str(len(expired))


@pytest.mark.slow
def test_shred_killed_anywhere_destroys_keys_before_rows_and_completes_when_run_again(zygote, template, tmp_path,
                                                                                    attacker_for):
    template.populate([*BYSTANDERS, *(Group("victim", f"t{k}", VICTIM_ROWS // 2, multi_every=200) for k in range(2))])
    layout = Layout(attacker_for, template)
    victim = set(ids_of(template, user="victim"))
    others = set(template.rows) - victim
    victim_tag = next(columns["owner_tag"] for columns in attacker_for(template.db).rows().values()
                      if columns["id"].hex() in victim)

    def keyed(copy: Template) -> bool:
        return any(name.split("\0")[-1].split(".")[0] == victim_tag.hex() for name in load(copy.ring))

    def check(copy: Template, run: Run) -> str:
        present = layout(copy, untouched=template.rows)
        assert others <= present, "the shred removed another owner's row"
        deleted = victim - present
        assert len(deleted) >= last_ack(run), "a batch the shred reported as committed is not"
        with copy.open() as vault:
            read_back(vault, copy, others)
            destroyed = bool(attacker_for(copy.db).recorded_key_versions()["tombstoned"])
            if keyed(copy):  # killed before the keyring entries went: nothing may be deleted yet
                assert not deleted, "rows were deleted while their owner's keys were still in the keyring"
                if destroyed:  # the tombstones committed: the keys are gone for the vault, the entries go next
                    unreadable(vault, copy, victim, KeyUnavailable, sample=SAMPLE // 10)
                    state = "tombstones committed, keyring entries not yet deleted"
                else:
                    read_back(vault, copy, victim)
                    state = "keys and rows still there"
            elif victim_tag in {tag for tag, _, _ in attacker_for(copy.db).commitments()}:
                state = "keyring entry gone, its transaction not committed"
            else:
                state = "keys gone, " + portion(deleted, victim, "rows deleted")
            if not keyed(copy):  # every row left is the template's, bytes unchanged, and it no longer opens
                unreadable(vault, copy, victim & present, KeyUnavailable, sample=SAMPLE // 10)
                unreadable(vault, copy, deleted, NotFound, sample=SAMPLE)
            assert vault.shred_owner("victim") == len(victim & present)  # run again, it completes
            unreadable(vault, copy, victim, NotFound, sample=SAMPLE)
        assert layout(copy) == others and not keyed(copy)
        assert victim_tag not in {tag for tag, _, _ in attacker_for(copy.db).commitments()}
        with copy.open() as vault:  # the owner starts afresh
            row_id = vault.put(Principal("victim"), "new", 0, "crash", "after the shred").id
            assert vault.get(Principal("victim"), row_id).content == "after the shred"
            read_back(vault, copy, others)
        return state

    figures = campaign(zygote, template, "shred", {"user": "victim"}, check, tmp_path, seed())
    assert figures.full_acks[-1] == str(len(victim))


@pytest.mark.slow
def test_deletes_killed_anywhere_leave_each_row_whole_or_not_found(zygote, template, tmp_path, attacker_for):
    targets = [Group(f"delete-{k}", "t", DELETES // 4, multi_every=5) for k in range(4)]
    template.populate([*BYSTANDERS, *targets])
    layout = Layout(attacker_for, template)
    order = [row for row, stored in template.rows.items() if stored.user.startswith("delete-")]  # owners take turns
    kept = set(template.rows) - set(order)

    def check(copy: Template, run: Run) -> str:
        assert run.acks == order[:len(run.acks)], "deletes acknowledged out of order"
        in_flight = order[len(run.acks)] if run.end is None and len(run.acks) < len(order) else None
        present = layout(copy, untouched=template.rows)
        assert not set(run.acks) & present, "an acknowledged delete left its row"
        assert kept | set(order[len(run.acks) + 1:]) <= present, "a row not (yet) deleted is gone"
        with copy.open() as vault:
            read_back(vault, copy, present)
            unreadable(vault, copy, set(order) - present, NotFound)
            if in_flight in present:  # whole, and it reads: delete it again
                vault.delete(Principal(copy.rows[in_flight].user), in_flight)
                unreadable(vault, copy, [in_flight], NotFound)
        assert in_flight not in layout(copy)
        if in_flight is None:
            return "all deleted"
        return "row being deleted whole" if in_flight in present else "row being deleted gone, not acknowledged"

    campaign(zygote, template, "delete", {"rows": [[template.rows[row].user, row] for row in order]}, check,
             tmp_path, seed())


@pytest.mark.slow
def test_rotations_killed_anywhere_keep_every_keyset_consistent(zygote, template, tmp_path, attacker_for):
    owners = [Group(f"rotate-{k}", "t", 3, multi_every=3 if k % 4 == 0 else 0) for k in range(ROTATIONS)]
    template.populate([*BYSTANDERS, *owners])
    layout = Layout(attacker_for, template)
    users = [group.user for group in owners]

    def check(copy: Template, run: Run) -> str:
        acked = [ack.split() for ack in run.acks]
        assert acked == [[user, "2"] for user in users[:len(acked)]], "rotations acknowledged wrongly"
        in_flight = users[len(acked)] if run.end is None and len(acked) < len(users) else None
        assert layout(copy, untouched=template.rows) == set(template.rows)
        state = "all rotated"
        with copy.open() as vault:
            assert {record.key_version for record in read_back(vault, copy, template.rows).values()} == {1}
            for position, user in enumerate(users):  # the next put works, under the version the keyring holds
                record = vault.get(Principal(user), vault.put(Principal(user), "after", 0, "crash", user).id)
                assert record.content == user
                wanted = {1, 2} if user == in_flight else {2 if position < len(acked) else 1}
                assert record.key_version in wanted, f"{user}: a put after the kill used version {record.key_version}"
                if user == in_flight:
                    state = f"owner being rotated at version {record.key_version}"
            if in_flight is not None:  # the half-rotated keyset goes through the rest of its life
                vault.rewrap(in_flight)
                vault.retire_old_key_versions(in_flight)
                read_back(vault, copy, ids_of(copy, user=in_flight))
        return state

    campaign(zygote, template, "rotate", {"users": users}, check, tmp_path, seed())


@pytest.mark.slow
def test_extend_turn_killed_anywhere_leaves_each_expiry_old_or_new(zygote, template, tmp_path, attacker_for):
    ttl = 2 * 86400.0
    template.populate([*BYSTANDERS, Group("extend", "long", EXTENDED, ttl=3600, multi_every=250),
                       Group("extend", "other", 20, ttl=3600)])
    layout = Layout(attacker_for, template)
    turn = set(ids_of(template, turn="long"))

    def check(copy: Template, run: Run) -> str:
        assert layout(copy, untouched=set(template.rows) - turn) == set(template.rows)
        with copy.open() as vault:
            records = read_back(vault, copy, template.rows)
            extended = {row for row, record in records.items() if record.expires_at != copy.rows[row].expires_at}
            assert extended <= turn, "a row outside the turn was extended"
            for row in extended:
                assert run.wall_start + ttl <= records[row].expires_at < run.wall_start + ttl + 60
            assert (run.end is None and not run.acks) or extended == turn, "the completed extension missed rows"
            rerun = time.time()
            assert vault.extend_turn(Principal("extend"), "long", ttl) == len(turn)  # run again: all of them
            expiries = {rep.expires_at for rep in vault.list_for_turn(Principal("extend"), "long")}
            assert len(expiries) == 1 and min(expiries) >= rerun + ttl
        return portion(extended, turn, "rows extended")

    campaign(zygote, template, "extend", {"user": "extend", "turn": "long", "ttl": ttl}, check, tmp_path, seed())


@pytest.mark.slow
def test_rewrap_killed_anywhere_keeps_every_row_readable_and_completes_when_run_again(zygote, template, tmp_path,
                                                                                    attacker_for):
    primary = {"rewrap-a": 2, "rewrap-b": 2, "rewrap-c": 3}
    template.populate([*BYSTANDERS, *(Group(user, "t", REWRAPPED // 4, multi_every=100) for user in primary)])
    with template.open() as vault:
        for user in primary:
            vault.rotate_owner_key(user)
    template.populate([Group("rewrap-c", "later", REWRAPPED // 4, multi_every=100)])  # under version 2
    with template.open() as vault:
        vault.rotate_owner_key("rewrap-c")
    layout = Layout(attacker_for, template)
    rotated = [row for row, stored in template.rows.items() if stored.user in primary]

    def check(copy: Template, run: Run) -> str:
        assert layout(copy, untouched=set(template.rows) - set(rotated)) == set(template.rows)
        with copy.open() as vault:
            records = read_back(vault, copy, template.rows)
            lagging = [row for row in rotated if records[row].key_version != primary[copy.rows[row].user]]
            assert len(rotated) - len(lagging) >= last_ack(run), "a batch rewrap reported as committed is not"
            assert run.end is None or not lagging, "the un-killed rewrap left rows"
            assert vault.rewrap() == len(lagging)  # run again, it completes
            assert [vault.retire_old_key_versions(user) for user in primary] == [1, 1, 2]  # refused if a row lags
            read_back(vault, copy, lagging)  # under the primary version now, the only one left
        return portion(set(rotated) - set(lagging), rotated, "rows rewrapped")

    figures = campaign(zygote, template, "rewrap", REWRAP_ARGS, check, tmp_path, seed())
    assert figures.full_acks[-1] == str(len(rotated))
