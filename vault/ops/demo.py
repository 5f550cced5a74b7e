"""The demo: two users, their observations, what a model sees, slices, a refused cross-user read, expiry, gc.

Runs against the OS keyring (keyring's own choice of backend; ``scripts/run demo`` starts a headless Secret
Service), in a fresh private database unless ``--db`` is given.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from vault import storage
from vault.errors import KeyUnavailable, NotFound
from vault.model import Principal
from vault.vault import Vault

WEB_PAGE = "\n".join(f"<p>Paragraph {i}: quarterly figures for region {i % 7}.</p>" for i in range(4000))
LISTING = {"results": [{"path": f"/srv/data/file{i:05}.csv", "size": i * 37} for i in range(10_000)],
           "truncated": False, "message": "listing complete"}


def run(db: str | Path | None, out: TextIO) -> int:
    """Run the demo, printing to ``out``; returns the process exit code. ``db``: a path or a postgresql:// URL
    (its search_path names the schema the demo writes to; the backup copy goes to a schema made and dropped)."""
    with tempfile.TemporaryDirectory(prefix="scratchvault-demo-") as scratch:
        path = db or Path(scratch) / "scratchpad.db"
        with Vault.open(path) as vault:
            return _story(vault, path, out)


def _story(vault: Vault, path: str | Path, out: TextIO) -> int:
    story = _Story(vault, path, out)
    ok = story.reads() and story.refused() and story.expiry() and story.shredding() and story.on_disk()
    return 0 if ok else 1


class _Story:
    """The demo's sections, in order; each says what it shows and returns whether the vault behaved."""

    def __init__(self, vault: Vault, path: str | Path, out: TextIO) -> None:
        self.vault, self.path, self.out = vault, path, out
        self.alice = Principal("alice", actor="planner", channel="web")
        self.bob = Principal("bob", actor="planner", channel="cli")

    def say(self, text: str = "") -> None:
        print(text, file=self.out)

    def reads(self) -> bool:
        vault, alice, bob, say = self.vault, self.alice, self.bob, self.say
        say(f"vault at {storage.display_location(self.path)} (keyring backend: {vault.stats()['keyring_backend']})")
        self.page = vault.put(alice, "turn-a1", 1, "web.fetch", WEB_PAGE)
        listing = vault.put(alice, "turn-a1", 2, "fs.list", LISTING)
        self.blob = vault.put(bob, "turn-b1", 1, "pdf.download", bytes(range(256)) * 4096)
        say("\n== what each model sees instead of the observations ==")
        for who, turn in ((alice, "turn-a1"), (bob, "turn-b1")):
            for rep in vault.list_for_turn(who, turn):
                say(f"[{who.user_id}] {json.dumps(rep.to_dict(), indent=2)}")
        say("\n== each model reads slices of its own user's rows ==")
        say(f"head 120 chars: {vault.read(alice, self.page.id, mode='head', n=120).content!r}")
        say(f"tail 60 chars: {vault.read(alice, self.page.id, mode='tail', n=60).content!r}")
        say(f"listing chars 0-80: {vault.read(alice, listing.id, mode='range', start=0, end=80).content!r}")
        full = vault.read(alice, self.page.id, mode="full")
        say(f"full read capped: returned {full.returned_size:,} of {full.full_size:,} chars, "
            f"truncated={full.truncated}")
        say(f"bob's binary, first 8 bytes as Base64: {vault.read(bob, self.blob.id, n=8).content}")
        return True

    def refused(self) -> bool:
        self.say("\n== bob's model tries alice's id ==")
        try:
            self.vault.read(self.bob, self.page.id)
        except NotFound as denied:
            self.say(f"refused: NotFound({denied}) - the same answer as for an id that never existed")
            return True
        self.say("ERROR: bob read alice's row")
        return False

    def expiry(self) -> bool:
        vault, say = self.vault, self.say
        say("\n== expiry and garbage collection ==")
        short = vault.put(self.bob, "turn-b1", 2, "shell", "temporary output " * 1000, ttl_seconds=1)
        say(f"bob stored a row with a 1 s lifetime; readable now: {vault.read(self.bob, short.id, n=17).content!r}")
        time.sleep(1.2)
        try:
            vault.read(self.bob, short.id)
        except NotFound:
            say("after 1.2 s it is unreadable, before any gc")
        else:
            say("ERROR: an expired row was readable")
            return False
        say(f"stats before gc: {_counts(vault)}")
        say(f"gc removed {vault.gc()} row(s); stats after gc: {_counts(vault)}")
        return True

    def shredding(self) -> bool:
        vault, say = self.vault, self.say
        say("\n== crypto-shredding a user ==")
        with self._backup() as copy:
            say(f"bob's rows before: {len(vault.list_for_turn(self.bob, 'turn-b1'))}; a backup copy was taken")
            say(f"shred_owner('bob') deleted his keyset from the keyring and {vault.shred_owner('bob')} row(s)")
            return self._backup_after_shred(copy)

    @contextlib.contextmanager
    def _backup(self) -> Iterator[str | Path]:
        """A backup copy of the vault: a file beside a SQLite file; a new schema (dropped afterwards) beside a
        PostgreSQL one."""
        if isinstance(self.path, Path):
            copy = self.path.parent / "backup-before-shred.db"
            copy.unlink(missing_ok=True)  # left by an earlier demo on the same --db
            storage.backup(self.path, copy)
            yield copy
            return
        from vault.storage.postgres.copies import side_schema

        with side_schema(self.path) as schema:
            storage.backup(self.path, schema)
            yield schema

    def _backup_after_shred(self, copy: str | Path) -> bool:
        say = self.say
        with Vault.open(copy) as old:
            try:
                old.get(self.bob, self.blob.id)
            except KeyUnavailable:
                say("bob's row in the backup copy: unreadable (KeyUnavailable: his key no longer exists)")
            else:
                say("ERROR: the backup still opened a shredded row")
                return False
            kept = old.read(self.alice, self.page.id, n=12).content
            say(f"alice's row in the same backup: still readable ({kept!r})")
        return True

    def on_disk(self) -> bool:
        self.say("\n== on disk ==")
        if isinstance(self.path, Path):
            raw, where = b"".join(p.read_bytes() for p in self.path.parent.glob("*.db*")), "the database files"
        else:
            from vault.storage.postgres.copies import stored_bytes

            raw, where = stored_bytes(self.path), "what the server stores in the vault's tables"
        leaked = [c for c in ("Paragraph 17", "alice", "turn-a1", "web.fetch", "/srv/data") if c.encode() in raw]
        self.say(f"plaintext canaries found in {where}: {leaked or 'none'}")
        return not leaked


def _counts(vault: Vault) -> dict[str, int]:
    stats = vault.stats()
    return {"rows": stats["rows"], "bytes": stats["bytes"], "expired_rows": stats["expired_rows"]}
