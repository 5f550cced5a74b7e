"""The Vault: the public API, and the one place that orders the access path. Every read-side method goes through
:meth:`Vault._open_row`: look the row up by id -> compare its owner tag with the caller's (constant time) and check
expiry -> on any failure the one NotFound -> only then fetch the owner's key, unwrap the data key and open the
metadata (``keys/recipe.py``). Nothing is decrypted before the check."""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any, Unpack

from keys import DeletionLedgers, KeyManager, OpenedRow, RowRecipe, tags_equal
from vault import audit
from vault.audit import AuditTrail, audited
from vault.counters import Counters
from vault.deletions import Deletions
from vault.errors import NotFound
from vault.extending import ChosenRows, Extender
from vault.inputs import (
    check_identifier,
    check_keywords,
    check_progress,
    check_read_args,
    check_step,
    check_time,
    check_ttl,
    expiry,
    parse_row_id,
)
from vault.lifecycle import REWRAP_BATCH, KeyLifecycle
from vault.listing import TurnListing
from vault.maintenance import KeyMaintenance, Maintenance
from vault.model import Principal, ReadResult, ReadWindow, Record, Representation, check_principal, full_record
from vault.opening import OpenOptions, OpenSettings, open_parts, split_options
from vault.quotas import OwnerQuotas
from vault.row.finding import DEFAULT_MATCHES, FindRequest, FindResult, find
from vault.row.format import Metadata, SummaryRecord
from vault.row.slices import chunk_span, cut, joined, plaintexts, plan
from vault.storage import Snapshot, Store, StoredRow
from vault.unsealing import RowUnsealer
from vault.writing import PutRequest, PutWriter

log = logging.getLogger("scratchvault")


class Vault:
    """An encrypted, ownership-checked store of observations (SQLite file by default), keys in the OS keyring."""

    def __init__(self, store: Store, keys: KeyManager, ledgers: DeletionLedgers, settings: OpenSettings,
                 quotas: OwnerQuotas) -> None:
        """A vault over an opened store and key manager (``Vault.open`` makes them); ``settings`` already checked."""
        self._store, self._keys, self._clock, self._quotas = store, keys, settings.clock, quotas
        self.max_read, self.max_ttl_seconds = settings.max_read, float(settings.max_ttl_seconds)
        self._recipe = RowRecipe(keys, self._now)
        self._counters = Counters()
        self._deletions = Deletions(store, keys, ledgers, self._counters, self._now, self.max_ttl_seconds)
        self._audit = AuditTrail(keys)
        self._lifecycle = KeyLifecycle(store, keys, self._recipe, self._counters, self._now)
        self._maintenance = KeyMaintenance(self, keys.registered_owner_names)
        self._writer = PutWriter(store, keys, self._recipe, self._counters, quotas)
        self._unsealer = RowUnsealer(self._recipe, store.max_chunks)
        self._extender = Extender(store, keys, self._recipe, self._deletions, self._unsealer.unseal, self._now)
        self._listing = TurnListing(store, keys, self._recipe, self._deletions, self._counters, self._now)

    @classmethod
    def open(cls, path: str | Path | None = None, **options: Unpack[OpenOptions]) -> Vault:
        """Open (or create) a vault at a path (SQLite) or a ``postgresql://`` URL; refuses unsafe paths and
        unacceptable keyrings before writing anything. ``keyring_backend``: None for the OS keyring, a backend
        instance, or ``"memory"``, a trial keyring whose keys (and so rows) die with the process. The other
        keywords are :class:`vault.opening.OpenSettings` (README, "API"): disk reserve (SQLite; None:
        max(64 MiB, 1%)), owner quotas (None: none), pool size (PostgreSQL; None: 8), expiry epochs."""
        keyring_backend, settings = split_options(options)
        quotas = settings.check()
        return cls(*open_parts(path, keyring_backend, settings), settings, quotas)

    # -- writing ---------------------------------------------------------------------------------------
    @audited("put")
    def put(self, principal: Principal, turn_id: str, step_num: int, executor_name: str, observation: Any,
            ttl_seconds: float = 3600) -> Representation:
        """Encrypt and store an observation (str, bytes-like, JSON dict/list, or a readable file object)."""
        check_principal(principal)
        check_identifier(turn_id, "turn_id")
        check_step(step_num)
        check_identifier(executor_name, "executor_name")
        ttl = check_ttl(ttl_seconds, self.max_ttl_seconds)
        created_at = self._now()
        rep = self._writer.write(PutRequest(principal, turn_id, step_num, executor_name, observation, created_at,
                                            expiry(created_at, ttl)))
        self._counters.count("puts")
        return rep

    @audited("delete")
    def delete(self, principal: Principal, id: str) -> None:
        """Delete one of the caller's rows (NotFound for anything else); nothing readable stays behind, and the
        row is entered in its owner's ledger of deleted rows (vault/deletions.py)."""
        with self._counters.integrity_guard(id):
            with self._store.snapshot() as reads:
                row, _, _ = self._open_row(reads, principal, id)
            self._deletions.delete(row)

    @audited("extend_turn")
    def extend_turn(self, principal: Principal, turn_id: str, ttl_seconds: float) -> int:
        """Make the caller's live rows of a turn live at least ``ttl_seconds`` more (a resumed dialog); returns
        how many were extended. Expired rows stay expired; no lifetime is shortened; a row its owner deleted and
        a writer of the file put back is never extended (vault/extending.py)."""
        check_principal(principal)
        check_identifier(turn_id, "turn_id")
        ttl = check_ttl(ttl_seconds, self.max_ttl_seconds)
        with self._counters.integrity_guard():
            return self._extender.extend(ChosenRows(principal.user_id, turn_id=turn_id), ttl)

    @audited("extend")
    def extend(self, principal: Principal, id: str, ttl_seconds: float) -> None:
        """Make one of the caller's live rows live at least ``ttl_seconds`` more (a read that refreshes it);
        NotFound as for a read when it is missing, expired or someone else's."""
        check_principal(principal)
        ttl, row_id = check_ttl(ttl_seconds, self.max_ttl_seconds), parse_row_id(id)
        if row_id is None:
            raise NotFound()
        with self._counters.integrity_guard():
            self._extender.extend(ChosenRows(principal.user_id, row_id=row_id), ttl)

    @audited("gc")
    def gc(self, now: float | None = None, *, progress: Callable[[int], None] | None = None) -> int:
        """Delete every row expired at ``now`` (default: the clock; rows still live by the clock are entered in
        their owners' ledgers of deleted rows, like deletes), then every row its owner deleted that was written
        back into the file; returns how many were removed. ``progress`` is called with the running total after
        each committed batch of rows expired by the clock."""
        clock = self._now()
        moment = clock if now is None else check_time(now)
        check_progress(progress)
        with self._counters.integrity_guard():
            self._keys.epochs.destroy_ended(clock)  # the keys of ended epochs first (threat_model.md, "Expiry epochs")
            removed = self._store.delete_expired(min(moment, clock), progress)
            removed += self._deletions.collect()  # the repair first: one owner's altered ledger stops only what follows
            return removed + (self._deletions.collect_early(clock, moment) if moment > clock else 0)

    # -- reading ---------------------------------------------------------------------------------------
    @audited("get")
    def get(self, principal: Principal, id: str, *, turn_id: str | None = None) -> Record:
        """The complete row, content decrypted (for the engine; a model reads through ``read``). With
        ``turn_id``, a row of another turn is NotFound too."""
        with self._counters.integrity_guard(id), self._store.snapshot() as reads:
            row, opened, metadata = self._open_row(reads, principal, id, turn_id)
            content = joined(plaintexts(reads, row, opened, metadata, 0, len(metadata.chunk_units) - 1),
                             metadata.content_kind)
            summary = SummaryRecord.decode(*opened.summary(reads.read_summary(row))).matching(metadata)
        self._counters.count("reads")
        return full_record(row.row_id, row.key_version, metadata, summary, content)

    @audited("read")
    def read(self, principal: Principal, id: str, mode: str = "head", n: int = 2000,
             **window: Unpack[ReadWindow]) -> ReadResult:
        """A slice of a row, at most ``max_read`` units, decrypting only the chunks that hold it; ``start`` and
        ``end`` (keywords) bound a ``range``. With ``turn_id``, a row of another turn is NotFound too (checked with
        the owner, before any decryption)."""
        check_keywords("read", window, ReadWindow.__optional_keys__)
        turn_id = window.get("turn_id")
        mode, n, start, end = check_read_args(mode, n, window.get("start"), window.get("end"))
        with self._counters.integrity_guard(id), self._store.snapshot() as reads:
            row, opened, metadata = self._open_row(reads, principal, id, turn_id)
            wanted = plan(mode, n, start, end, metadata.size_units, self.max_read)
            content = ""
            if wanted.end > wanted.start:
                first, last, offset = chunk_span(metadata.chunk_units, wanted.start, wanted.end)
                pieces = plaintexts(reads, row, opened, metadata, first, last)
                content = cut(pieces, metadata.content_kind, wanted.start - offset, wanted.end - offset)
        self._counters.count("reads")
        return ReadResult(id=row.row_id.hex(), content=content, content_kind=metadata.content_kind, mode=mode,
                          full_size=metadata.size_units, returned_size=wanted.end - wanted.start,
                          truncated=wanted.truncated, start=wanted.start, end=wanted.end)

    @audited("find")
    def find(self, principal: Principal, id: str, query: str, *, n: int = DEFAULT_MATCHES, ignore_case: bool = False,
             turn_id: str | None = None) -> FindResult:
        """Up to ``n`` places where ``query`` occurs, literally, in a row, each with its offset in the row's units
        and its line; streamed chunk by chunk (memory O(chunk)), lines within ``max_read`` units together, on
        the same access path as ``read`` (vault/row/finding.py)."""
        request = FindRequest(query, n, ignore_case)
        with self._counters.integrity_guard(id), self._store.snapshot() as reads:
            row, opened, metadata = self._open_row(reads, principal, id, turn_id)
            with closing(plaintexts(reads, row, opened, metadata, 0, len(metadata.chunk_units) - 1)) as pieces:
                matches, more = find(pieces, metadata.content_kind, request, self.max_read)
        self._counters.count("reads")
        return FindResult(row.row_id.hex(), metadata.content_kind, matches, more, metadata.size_units)

    @audited("list")
    def list_for_turn(self, principal: Principal, turn_id: str) -> list[Representation]:
        """Representations of the caller's unexpired rows in a turn, by step number; summaries only."""
        check_principal(principal)
        check_identifier(turn_id, "turn_id")
        return self._listing.list(principal.user_id, turn_id)

    def has_rows(self, principal: Principal, turn_id: str) -> bool:
        """Whether the caller has readable (unexpired) rows in a turn; decrypts nothing (offer the tool or not)."""
        check_principal(principal)
        check_identifier(turn_id, "turn_id")
        return self._listing.has_rows(principal.user_id, turn_id)

    def stats(self) -> dict[str, Any]:
        """Counts of rows and bytes stored (in all and by key version), expired-but-uncollected rows, free space
        and the disk reserve, the owner quotas, and this process's counters (reads, denials, integrity failures)."""
        return {**self._store.stats(self._now()), "quotas": self._quotas.report(),
                "counters": self._counters.snapshot(), **self._keys.stats()}

    def audit_tags(self, *, user_id: str | None = None, actor: str | None = None, channel: str | None = None,
                   turn_id: str | None = None) -> dict[str, str]:
        """The tags these identifiers carry in this vault's audit records (keys user, actor, channel, turn)."""
        return self._audit.tags(user_id=user_id, actor=actor, channel=channel, turn_id=turn_id)

    # -- key management (README, "Key management"); vault/lifecycle.py --------------------------------
    @audited("rotate")
    def rotate_owner_key(self, user_id: str) -> int:
        """Add a new key version for an owner and make it primary: new rows use it, old rows still read.
        Returns the new version. Run ``rewrap`` next, then ``retire_old_key_versions``."""
        return self._lifecycle.rotate(user_id)

    @audited("rewrap")
    def rewrap(self, user_id: str | None = None, *, batch: int = REWRAP_BATCH,
               progress: Callable[[int], None] | None = None) -> int:
        """Re-wrap the data keys of rows under older versions with the primary one, in batches (resumable).
        Content is not touched: O(rows). ``user_id=None`` rewraps every owner the vault knows. Returns how many
        rows were re-wrapped; ``progress`` is called with the running total after each committed batch."""
        return self._lifecycle.rewrap(user_id, batch, progress)

    @audited("retire")
    def retire_old_key_versions(self, user_id: str) -> int:
        """Remove from the keyring every non-primary version no row uses; refuse (InvalidArgument, nothing
        removed) while any row still needs one. Returns how many versions were removed. A backup taken
        before the rewrap can no longer be read for rows that only the retired versions unwrapped."""
        return self._lifecycle.retire(user_id)

    @audited("shred")
    def shred_owner(self, user_id: str, *, progress: Callable[[int], None] | None = None) -> int:
        """Crypto-shred an owner: delete their keyset from the keyring first (every copy of their rows, in
        backups or free pages, becomes unreadable), then every row of theirs. Other owners are untouched.
        Safe to run again after an interruption. Returns how many rows were deleted."""
        return self._lifecycle.shred(user_id, progress)

    def maintain_keys(self, *, progress: Callable[[int], None] | None = None) -> Maintenance:
        """gc, then rotate, rewrap and retire every registered owner's key: every key version that wrapped a row
        deleted or expired before the call is destroyed when it returns, so no copy of the database (a backup,
        PostgreSQL's WAL, archives, replicas) opens such a row again. Safe to run again at any time, also after
        a failure. An owner whose step fails is reported in ``failed`` and the others still run; a StorageError
        (the database itself) stops the run. ``progress`` gets the running total of rows re-wrapped."""
        return self._maintenance.run(progress)

    def close(self) -> None:
        """Close the database and forget every cached key."""
        self._keys.close()
        self._store.close()

    def __enter__(self) -> Vault:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Vault backend={self._keys.backend_name}>"

    # -- the access path -------------------------------------------------------------------------------
    def _open_row(self, reads: Snapshot, principal: Principal, id: str,
                  turn_id: str | None = None) -> tuple[StoredRow, OpenedRow, Metadata]:
        """Look up -> check owner, turn (when asked), expiry and the owner's ledger of deleted rows (NotFound)
        -> only then fetch the key and decrypt."""
        check_principal(principal)
        if turn_id is not None:
            check_identifier(turn_id, "turn_id")
        row_id = parse_row_id(id)
        index = self._keys.index_key()
        owner_tag = index.owner_tag(principal.user_id)
        row = reads.find_row(owner_tag, row_id, index.row_seq(row_id)) if row_id is not None else None
        mine = row is not None and tags_equal(row.owner_tag, owner_tag) and (
            turn_id is None or tags_equal(row.turn_tag, index.turn_tag(owner_tag, turn_id)))
        if row is None or not mine or row.expires_at <= self._now() or (
                self._deletions.named(reads, index, owner_tag).names(row.row_id)):  # deleted, then written back
            self._counters.count("denied")
            denied = (not mine) if row is not None else (
                row_id is not None and reads.held_by_another(owner_tag, row_id, index.row_seq(row_id)))
            audit.note(denied=denied)  # only the operator's audit trail tells these apart
            log.info("scratchvault: access denied or no such row")
            raise NotFound()
        opened, metadata = self._unsealer.unseal(principal.user_id, row)
        return row, opened, metadata

    def _now(self) -> float:
        return check_time(self._clock())
