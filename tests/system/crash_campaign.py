"""Pre-populated vaults and kill campaigns for tests/system/test_crash_operations.py.

A ``Template`` is a closed vault and its keyring file, populated once through the API; every kill runs on a fresh
copy of both, made by the attacker of the store under test (``attacker_for``): on SQLite the one file (its WAL
checkpointed away on close), on PostgreSQL a copy of the vault's schema. ``campaign`` times the operation on
copies (un-killed), then kills it at ``KILLS`` points spread evenly, with jitter, over 0.02..0.98 of that
duration, measured from the start the worker announces, and hands every killed copy to the test's checks.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import random
import shutil
import statistics
import time
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.attacks.stores import STORE
from tests.support.file_keyring import FileKeyring
from tests.support.tiers import crash_kills
from tests.system.crash_ops import Run, Zygote
from vault import Principal, Record, Vault

CHUNK = 64 * 1024  # plaintext bytes per chunk; the content below is ASCII or binary, so bytes == units
# planned kill points per operation; on PostgreSQL every row costs several times more to copy, check and read
# back (round trips to the server), and fewer points keep its six campaigns near a minute
KILLS = crash_kills(24 if STORE == "sqlite" else 10)  # fewer in the quick tier
SAMPLE = 300  # rows gone from the file, asked for through the API too after each kill (a new draw each time)
NEEDED_INSIDE = KILLS * 5 // 6  # kills that must land inside the operation (20 of 24)
SPREAD = KILLS // 2  # twentieths of the operation's duration the kills must hit (12 of 24)
TIMINGS = 3  # un-killed runs; the shortest is the duration the kill points are spread over


def content(user: str, turn: str, step: int, multi: bool) -> object:
    """The observation a template stores at (user, turn, step): text, binary or JSON; ``multi``: 2 to 4 chunks."""
    seed = f"{user}/{turn}/{step}"
    rng = random.Random(seed)
    size = rng.randint(CHUNK + 1, 4 * CHUNK - 1) if multi else rng.randint(1, 1500)
    kind = step % 3
    if kind == 0:
        return rng.randbytes(size)
    text = rng.randbytes(size).hex()[:size]
    return text if kind == 1 else {"seed": seed, "text": text}


def digest(value: object) -> str:
    raw = value if isinstance(value, bytes) else (value if isinstance(value, str) else json.dumps(value)).encode()
    return hashlib.sha256(raw).hexdigest()


@dataclass(frozen=True)
class Row:
    """What a template stored: owner, turn, content digest, expiry."""

    user: str
    turn: str
    sha: str
    expires_at: float


@dataclass(frozen=True)
class Group:
    """``count`` rows of ``user`` in ``turn``, living ``ttl`` seconds; every ``multi_every``-th spans chunks."""

    user: str
    turn: str
    count: int
    ttl: float = 86400.0
    multi_every: int = 0


@dataclass
class Template:
    """A populated vault named ``directory / "vault.db"`` beside its keyring file ``ring.json``, kept by ``store``
    (the attacker class ``attacker_for`` gives: a file on SQLite, a schema made for that path on PostgreSQL), and
    what each row holds."""

    directory: Path
    store: type
    rows: dict[str, Row] = field(default_factory=dict)

    @property
    def db(self) -> Path:  # the file itself on SQLite, the path its schema is made for on PostgreSQL
        return self.directory / "vault.db"

    @property
    def location(self) -> str | Path:
        """What ``Vault.open`` takes to open this vault (on PostgreSQL, asking for it makes a pending copy)."""
        return self.store(self.db).location

    @property
    def ring(self) -> Path:
        return self.directory / "ring.json"

    def open(self, clock: Callable[[], float] | None = None) -> Vault:
        return Vault.open(self.location, keyring_backend=FileKeyring(self.ring), **({"clock": clock} if clock else {}))

    def populate(self, groups: list[Group], clock: Callable[[], float] | None = None) -> None:
        """Put every group's rows, one row of each group in turn so that their seqs (and pages) interleave
        (``clock``: the vault's, to make rows that are already expired)."""
        with self.open(clock) as vault:
            for step in range(max(group.count for group in groups)):
                for group in groups:
                    if step < group.count:
                        self.put(vault, group, step)

    def put(self, vault: Vault, group: Group, step: int) -> str:
        """Put one row of a group through ``vault``; returns its id."""
        multi = bool(group.multi_every) and step % group.multi_every == 0
        observation = content(group.user, group.turn, step, multi)
        rep = vault.put(Principal(group.user), group.turn, step, "crash", observation, ttl_seconds=group.ttl)
        self.rows[rep.id] = Row(group.user, group.turn, digest(observation), rep.expires_at)
        return rep.id

    def copy(self, directory: Path) -> Template:
        """The same vault in a new private directory (the store's copy, and the keyring file), sharing the row
        table; made now, before any worker opens it."""
        assert not Path(f"{self.db}-wal").exists(), "the template was not closed: its WAL would be left behind"
        self.store.copy_tree(self.directory, directory)
        copied = Template(directory, self.store, self.rows)
        self.store(copied.db)  # PostgreSQL makes a copied schema when its path is first used: here, not in a worker
        return copied

    def discard(self) -> None:
        """Remove this vault: its directory, and what the store made for it (PostgreSQL's schemas)."""
        self.store.discard(self.directory)
        shutil.rmtree(self.directory)


class Layout:
    """A copy's rows as an attacker reads the file (``attacker_for``), checked against the template's: the
    integrity check passes, every row has its summary and exactly its chunks (never half a row), no summary or
    chunk is orphaned, and the rows named ``untouched`` are byte for byte what the template stored."""

    def __init__(self, attacker_for, template: Template) -> None:
        self._attacker_for = attacker_for
        self._original = self._scan(template.db, whole=True)
        assert set(self._original) == set(template.rows)

    def _scan(self, db: Path, whole: bool) -> dict[str, tuple]:
        """{id: (chunk indexes, and with ``whole`` every stored part: columns, summary, sealed chunks)}."""
        attacker = self._attacker_for(db)
        assert attacker.intact(), "the store's integrity check failed (SQLite's PRAGMA, or amcheck)"
        rows, summaries = attacker.rows(), attacker.summaries()
        sealed = attacker.chunks() if whole else dict.fromkeys(
            (seq, index) for seq, indexes in attacker.chunk_indexes().items() for index in indexes)
        assert set(summaries) == set(rows), "a summary without its row, or a row without its summary"
        chunks: dict[int, list[int]] = {}
        for seq, index in sorted(sealed):
            chunks.setdefault(seq, []).append(index)
        assert set(chunks) <= set(rows), "chunks of a row that does not exist"
        found = {}
        for seq, columns in rows.items():
            indexes = chunks.get(seq, [])
            parts = (columns, summaries[seq], [sealed[seq, index] for index in indexes]) if whole else ()
            found[columns["id"].hex()] = (indexes, *parts)
        return found

    def __call__(self, copy: Template, untouched: Collection[str] = ()) -> set[str]:
        """The ids of the rows stored in ``copy``, after the checks above."""
        found = self._scan(copy.db, whole=bool(untouched))
        for row_id, parts in found.items():
            assert row_id in self._original, f"{row_id}: a row the template never had"
            assert parts[0] == self._original[row_id][0], f"{row_id}: not all its chunks, or another's"
            if row_id in untouched:
                assert parts == self._original[row_id], f"{row_id}: altered, though nothing may alter it"
        return set(found)


def read_back(vault: Vault, template: Template, ids) -> dict[str, Record]:
    """Every row in ``ids`` read in full: content identical to what was put."""
    records = {}
    for row_id in ids:
        row = template.rows[row_id]
        record = vault.get(Principal(row.user), row_id)
        assert digest(record.content) == row.sha, f"{row_id} reads back altered"
        records[row_id] = record
    return records


def unreadable(vault: Vault, template: Template, ids: Collection[str], *errors: type[Exception],
               sample: int | None = None) -> None:
    """No row in ``ids`` (``sample``: that many of them, drawn afresh each time) opens for its own owner: each
    raises one of ``errors``."""
    chosen = sorted(ids) if sample is None or sample >= len(ids) else random.sample(sorted(ids), sample)
    for row_id in chosen:
        with pytest.raises(errors):
            vault.get(Principal(template.rows[row_id].user), row_id)


def ids_of(template: Template, *, user: str | None = None, turn: str | None = None) -> list[str]:
    """The ids of a template's rows of ``user`` and/or in ``turn``, in the order they were put."""
    return [row_id for row_id, row in template.rows.items()
            if (user is None or row.user == user) and (turn is None or row.turn == turn)]


def portion(part: Collection, whole: Collection, what: str) -> str:
    """"no / some / all <what>", for the states a campaign reports."""
    return f"{'no' if not part else 'all' if len(part) == len(whole) else 'some'} {what}"


def last_ack(run: Run) -> int:
    """The running total the last acknowledged batch reported (0: none)."""
    return int(run.acks[-1]) if run.acks else 0


Check = Callable[[Template, Run], str]  # checks a copy after a run; returns the state it found, in a word or two


@dataclass
class Figures:
    """One operation's campaign: its un-killed durations, every kill, the states the checks found, the acks of
    the un-killed runs, and how long it all took."""

    operation: str
    durations: list[float]
    runs: list[Run]
    states: Counter[str]
    full_acks: list[str]
    seconds: float

    @property
    def inside(self) -> list[Run]:
        return [run for run in self.runs if run.inside]

    def points(self) -> list[float]:
        return sorted(run.fraction for run in self.inside)

    def twentieths(self) -> int:
        return len({min(19, int(point * 20)) for point in self.points()})

    def line(self) -> str:
        """The summary the lead copies into the closing note."""
        points = self.points()
        offsets = sorted(1000 * (run.killed_at - run.start) for run in self.inside)
        gaps = [b - a for a, b in itertools.pairwise(offsets)] or [0.0]
        late = sorted(1000 * (run.killed_at - run.planned) for run in self.runs)
        return (f"crash {self.operation}: {len(self.inside)}/{len(self.runs)} kills inside the operation; duration "
                f"median {1000 * statistics.median(self.durations):.0f} ms of {len(self.durations)} complete runs "
                f"({min(self.durations) * 1000:.0f}..{max(self.durations) * 1000:.0f}); kills at {offsets[0]:.1f}.."
                f"{offsets[-1]:.1f} ms = {points[0]:.2f}..{points[-1]:.2f} of the shortest run then seen, "
                f"{self.twentieths()}/20 twentieths hit, median gap {statistics.median(gaps):.1f} ms; kill late by "
                f"median {statistics.median(late):.2f} ms, max {late[-1]:.2f} ms; states found: "
                f"{dict(self.states.most_common())}; {self.seconds:.1f} s")


def campaign(zygote: Zygote, template: Template, operation: str, args: dict, check: Check, scratch: Path,
             seed: int) -> Figures:
    """Time ``operation`` on copies of ``template``, then kill it at ``KILLS`` points and ``check`` every copy,
    un-killed ones included. A kill point is a fraction of the shortest run seen so far: on a loaded machine
    durations vary, so a kill that came after the end tells a shorter duration, and its point is tried again."""
    began, durations, full_acks, states = time.monotonic(), [], [], Counter()
    for attempt in range(TIMINGS):
        run = _checked(zygote, template, operation, args, check, scratch / f"timing-{attempt}", None, 0.0)
        durations.append(run.end - run.start)
        full_acks = run.acks
    rng = random.Random(seed)
    runs = []
    for point in range(KILLS):
        fraction = 0.02 + 0.96 * (point + rng.uniform(0.1, 0.9)) / KILLS
        for attempt in range(3):
            run = _checked(zygote, template, operation, args, check, scratch / f"kill-{point}-{attempt}", fraction,
                           min(durations), states)
            runs.append(run)
            if run.inside:
                break
            durations.append(run.end - run.start)
    figures = Figures(operation, durations, runs, states, full_acks, time.monotonic() - began)
    print(figures.line(), f"(seed {seed})")
    assert len(figures.inside) >= NEEDED_INSIDE, figures.line()
    assert figures.twentieths() >= SPREAD, f"the kills bunched together: {figures.line()}"
    return figures


def _checked(zygote: Zygote, template: Template, operation: str, args: dict, check: Check, directory: Path,
             fraction: float | None, duration: float, states: Counter[str] | None = None) -> Run:
    """One run on a fresh copy, killed at ``fraction`` of ``duration`` (None: after its end), then checked."""
    copy = template.copy(directory)
    run = zygote.run(copy.location, copy.ring, operation, args, fraction, duration)
    copy.store(copy.db).settle()  # PostgreSQL: the killed worker's session may still be committing
    state = check(copy, run)
    if states is not None:
        states[state] += 1
    copy.discard()
    return run


def seed() -> int:
    """A fresh seed per campaign, printed with its figures (to replay a failing set of kill points)."""
    return int.from_bytes(os.urandom(4), "big")
