"""The world the tampering suite attacks, and how it judges an attack.

Vault A holds alice's 3-chunk text, json and binary rows and bob's text row; vault B, on the same in-memory
keyring, one row of each. Every attack runs on a fresh copy of both files, twice: tampered while vault A is closed
(then reopened), and while it is open with keys and pages cached. The audit then tries every principal x every id
(pristine or now in the file) x every read path, then every listing and every foreign delete: each must raise
NotFound or IntegrityError (counted), or return exactly what the untouched vault returned, and nothing stored may
disappear.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import keyring.errors
import pytest

from keys.epochs.schedule import epoch_end
from keys.testing import MemoryKeyring
from tests.support.clock import T0, FakeClock
from vault import IntegrityError, KeyUnavailable, NotFound, Principal, Vault, VaultError

PRINCIPALS = {"alice": Principal("alice", actor="planner"), "bob": Principal("bob")}
TURNS = ("t", "u")
BIG = "".join(f"line {i:06d} of the page\n" for i in range(6250))  # 150,000 chars: 3 chunks
PATHS: dict[str, Callable] = {
    "get": lambda v, p, i: v.get(p, i),
    "head": lambda v, p, i: v.read(p, i, mode="head", n=100),
    "tail": lambda v, p, i: v.read(p, i, mode="tail", n=100),
    "range": lambda v, p, i: v.read(p, i, mode="range", start=70_000, end=70_100),
    "full": lambda v, p, i: v.read(p, i, mode="full"),
}
ANY_DENIAL, INTEGRITY = {"notfound", "integrity"}, {"integrity"}


def open_vault(location: object, ring: MemoryKeyring) -> Vault:
    """The vault at ``location`` (an attacker's ``location``: a file's path, or a PostgreSQL URL)."""
    return Vault.open(location, keyring_backend=ring, clock=FakeClock(T0), max_read=200_000)


def open_copy(world: dict, path: Path) -> Vault:
    """The vault the world's attacker keeps for ``path`` (a vault's file, or its PostgreSQL schema)."""
    return open_vault(world["attacker_for"](path).location, world["ring"])


def abandon_a_rotation(vault: Vault, ring: MemoryKeyring, user_id: str) -> None:
    """A rotation whose keyring write fails: its reserved version is left tombstoned, the keyset unchanged."""
    def refuse(service: str, username: str, password: str) -> None:
        raise keyring.errors.KeyringLocked("locked for the test")

    ring.set_password = refuse
    try:
        with pytest.raises(KeyUnavailable):
            vault.rotate_owner_key(user_id)
    finally:
        del ring.set_password


def make_epoch_keys(vault: Vault) -> None:
    """An epoch key that lives and one destroyed, so the epoch tables hold a key, a reservation and tombstones to
    tamper with too. The destroyed one ended before T0, as only an ended epoch is destroyed: a row moved into an
    epoch that has not ended and has no key is tampering (IntegrityError), one moved into a destroyed epoch is gone."""
    epochs = vault._keys.epochs
    past, later = epochs.epoch_of_expiry(T0 - 3 * 3600), epochs.epoch_of_expiry(T0 + 3 * 3600)
    epochs.get_or_create(past, T0 - 4 * 3600)
    epochs.get_or_create(later, T0)
    assert epoch_end(past[1], past[0]) + epochs.skew <= T0
    assert epochs.destroy_ended(T0).destroyed == [past]


def build_world(root: Path, layout: str, attacker_for: Callable) -> dict:
    """Vaults A and B under ``root`` in files of ``layout``: made by this scratchvault (rows found by the seq their
    id names) or before schema 3 (found by an index on ids); with what every read path returned."""
    ring = MemoryKeyring()
    alice, bob = PRINCIPALS["alice"], PRINCIPALS["bob"]
    for name in ("a", "b"):
        os.mkdir(root / name, 0o700)
        attacker_for(root / name / "v.db").prepare(layout)
    attacker = attacker_for(root / "a" / "v.db")
    with open_vault(attacker.location, ring) as a:
        make_epoch_keys(a)  # first: the past epoch's key is made before any later key starts the marker
        ids = {"big": a.put(alice, "t", 1, "web.fetch", BIG).id,
               "json": a.put(alice, "t", 2, "ls", {"entries": list(range(50)), "count": 50}).id,
               "blob": a.put(alice, "u", 1, "download", bytes(range(256)) * 300).id,
               "bob": a.put(bob, "t", 1, "web.fetch", "bob's page " * 100).id,
               "old": a.put(alice, "t", 4, "web.fetch", "written before schema 6 " * 50).id}
        abandon_a_rotation(a, ring, "alice")  # so alice has a reservation and a tombstone to tamper with too
        a.delete(alice, a.put(alice, "t", 3, "scratch", "deleted at once").id)  # so alice has a ledger of deletes
        pristine = {(who, i, name): call(a, p, i) for who, p in PRINCIPALS.items() for i in ids.values()
                    for name, call in PATHS.items() if (who == "bob") == (i == ids["bob"])}
        lists = {(who, turn): a.list_for_turn(p, turn) for who, p in PRINCIPALS.items() for turn in TURNS}
    with open_vault(attacker_for(root / "b" / "v.db").location, ring) as b:
        b.put(alice, "t", 1, "web.fetch", "vault b, alice " * 100)
        b.put(bob, "t", 1, "web.fetch", "vault b, bob " * 100)
    seqs = {name: attacker.seq_of(i) for name, i in ids.items()}
    attacker.lay_out_as_before_inline(seqs["old"])  # a one-chunk row as the upgrade leaves those made before it
    assert attacker.chunk_indexes()[seqs["big"]] == [0, 1, 2]
    assert attacker.read(seqs["json"], "chunk", 0) == attacker.row_parts(ids["json"])["first_chunk"]
    assert len(pristine[("alice", ids["big"], "get")].content) == 150_000
    return dict(root=root, ring=ring, ids=ids, seqs=seqs, pristine=pristine, lists=lists, layout=layout,
                attacker_for=attacker_for)


class Target:
    """What a tamper variant gets: the attacker's handles on vault A's file (``a``) and vault B's (``b``), and
    vault A's rows' seqs by their name in the world (``big``: the three-chunk row; ``json``: a row of one chunk,
    held in the row with its summary; ``old``: a row of one chunk with its summary and chunk in their tables, as
    rows written before schema 6 are)."""

    def __init__(self, a, b, seqs: dict[str, int]) -> None:
        self.a, self.b, self.seqs, self.big = a, b, seqs, seqs["big"]


def integrity_failures(vault: Vault) -> int:
    """This process's count of integrity failures, as ``stats`` reports it, without the store's counts that stats
    reads too (a round trip each on PostgreSQL; ``audit`` calls stats itself once)."""
    return vault._counters.snapshot()["integrity_failures"]


def attempt(vault: Vault, call: Callable, tolerated: tuple = ()) -> tuple[str, object]:
    before = integrity_failures(vault)
    try:
        return "ok", call()
    except NotFound:
        return "notfound", None
    except IntegrityError:
        assert integrity_failures(vault) > before, "IntegrityError not counted"
        return "integrity", None
    except tolerated as error:
        return type(error).__name__, None


def audit(vault: Vault, attacker, world: dict, tolerated: tuple = ()) -> dict:
    """Every principal x every id (pristine or now in the file) x every path, then every listing."""
    pristine, counts = world["pristine"], attacker.counts()
    present = attacker.row_ids()
    outcomes = {}
    for who, principal in PRINCIPALS.items():
        for row_id in sorted(present | set(world["ids"].values())):
            for name, call in PATHS.items():
                kind, value = attempt(vault, lambda c=call, i=row_id: c(vault, principal, i), tolerated)
                if kind == "ok":
                    assert (who, row_id, name) in pristine, f"{who} read a row it never owned via {name}"
                    assert value == pristine[(who, row_id, name)], f"{who} got altered content via {name}"
                outcomes[(who, row_id, name)] = kind
        for turn in TURNS:
            kind, listed = attempt(vault, lambda p=principal, t=turn: vault.list_for_turn(p, t), tolerated)
            for rep in listed or ():
                assert rep in world["lists"][(who, turn)], f"{who} listed an altered representation"
            outcomes[(who, turn, "list")] = kind
    for who, principal in PRINCIPALS.items():  # non-owners can never delete, even a row re-tagged as theirs
        for row_id in present:
            if (who, row_id, "get") not in pristine:
                assert attempt(vault, lambda p=principal, i=row_id: vault.delete(p, i), tolerated)[0] != "ok"
    assert attacker.counts() == counts, "a failed read or delete removed stored data"
    try:
        assert vault.stats()["counters"]["integrity_failures"] == integrity_failures(vault)
    except VaultError:  # the store's counts fail too where the damage is in the counted columns (an altered type)
        pass
    return outcomes


def fresh_copy(world: dict, directory: Path) -> Path:
    """Both vaults copied to ``directory``; the path of vault A's (its attacker's key to the copy)."""
    world["attacker_for"].copy_tree(world["root"], directory)
    return directory / "a" / "v.db"


def check(world: dict, tmp_path: Path, variants: list, must: list = (), tolerated: tuple = ()) -> None:
    """Each variant on a fresh copy, closed then open; ``must`` lists (who, row, path, {allowed outcomes})."""
    ids, attacker_for = world["ids"], world["attacker_for"]
    for number, tamper in enumerate(variants):
        for while_open in (False, True):
            directory = tmp_path / f"{number}-{while_open}"
            path = fresh_copy(world, directory)
            vault = open_copy(world, path) if while_open else None
            if vault is not None:
                vault.get(PRINCIPALS["alice"], ids["big"])  # keys and pages cached before the attack
            tamper(Target(attacker_for(path), attacker_for(directory / "b" / "v.db"), world["seqs"]))
            try:
                opened = vault or open_copy(world, path)
            except IntegrityError as refused:  # a column's type altered: the schema is not the vault's, the store
                assert "did not make" in str(refused)  # is refused whole at open, and nothing of it is served
                attacker_for.discard(directory)
                continue
            with opened:
                outcomes = audit(opened, attacker_for(path), world, tolerated)
            attacker_for.discard(directory)
            new = [key for key in outcomes if key[1] not in ids.values() and key[1] not in TURNS]
            for who, row, name, allowed in must:
                keys = [k for k in new if (k[0], k[2]) == (who, name)] if row == "new" else [
                    (who, ids.get(row, row), name)]
                assert keys and all(outcomes[k] in allowed for k in keys), (who, row, name, while_open, number)


def must(*paths: str, allowed: set = INTEGRITY, who: str = "alice", row: str = "big") -> list[tuple]:
    return [(who, row, path, allowed) for path in paths]
