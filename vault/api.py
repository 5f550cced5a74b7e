"""The Vault: the public API, and the one place that orders the access path.

Every read-side method goes through :meth:`Vault._open_row`: look the row up by id -> compare its owner tag
with the caller's (constant time) and check expiry -> on any failure raise the one NotFound -> only then
fetch the owner's key, unwrap the data key and open the metadata. Nothing is decrypted before the check.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
import operator
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from keyring.backend import KeyringBackend

from keys import DataKey, KeyManager, KeyringStore, OwnerKeyset, resolve_backend, tags_equal
from keys.aead import TAG_SIZE, random_bytes
from keys.envelope import (
    SUMMARY_V2,
    RowContext,
    chunk_aad,
    context_digest,
    meta_aad,
    summary_aad,
    summary_aad_v2,
    summary_aads_v2,
    wrap_aad,
)
from keys.errors import IntegrityError, InvalidArgument, KeyUnavailable, NotFound
from keys.turnkey import TurnKey
from vault import audit, paths
from vault.audit import audited
from vault.inputs import (
    check_identifier,
    check_int,
    check_positive_setting,
    check_progress,
    check_read_args,
    check_step,
    check_time,
    check_ttl,
    expiry,
    parse_row_id,
)
from vault.lifecycle import KeyLifecycle
from vault.model import Principal, ReadResult, Record, Representation, new_representation
from vault.rowformat import (
    CHUNK_BYTES,
    Metadata,
    SummaryRecord,
    classify,
    content_chunks,
    encode_json,
    summary_fields,
)
from vault.slices import chunk_span, plan
from vault.store import RowHeader, SqliteStore
from vault.summaries import SummaryBuilder

log = logging.getLogger("scratchvault")
DEFAULT_MAX_TTL = 30 * 24 * 3600.0
DEFAULT_KEY_CACHE_SECONDS = 300.0
MAX_KEY_CACHE_SECONDS = 3600.0  # keys stay in memory at most this long after a keyring read
DEFAULT_KEYRING_TIMEOUT = 10.0  # seconds one keyring call may take before it is KeyUnavailable
DEFAULT_KEY_CACHE_SIZE = 1024
MAX_READ_LIMIT = 10_000_000
_OPEN_ROW = tuple[RowHeader, DataKey, Metadata, RowContext]
_LISTING_ORDER = operator.attrgetter("step_num", "created_at")  # in C: a listing sorts up to thousands
_SEQ, _ROW_ID = operator.itemgetter(0), operator.itemgetter(1)  # columns of a listed row


class Vault(KeyLifecycle):
    """An encrypted, ownership-checked store of observations in one SQLite file, keys in the OS keyring."""

    def __init__(self, store: SqliteStore, keys: KeyManager, *, clock: Callable[[], float], max_read: int,
                 max_ttl_seconds: float) -> None:
        self._store = store
        self._keys = keys
        self._clock = clock
        self.max_read = max_read
        self.max_ttl_seconds = max_ttl_seconds
        self._counters = dict.fromkeys(("puts", "reads", "denied", "integrity_failures"), 0)
        self._counter_lock = threading.Lock()

    @classmethod
    def open(
        cls,
        path: str | Path | None = None,
        *,
        keyring_backend: KeyringBackend | None = None,
        clock: Callable[[], float] = time.time,
        max_read: int = 16000,
        max_ttl_seconds: float = DEFAULT_MAX_TTL,
        key_cache_seconds: float = DEFAULT_KEY_CACHE_SECONDS,
        key_cache_size: int = DEFAULT_KEY_CACHE_SIZE,
        keyring_timeout: float = DEFAULT_KEYRING_TIMEOUT,
    ) -> Vault:
        """Open (or create) a vault; refuses unsafe paths and unacceptable keyrings before writing anything."""
        check_int(max_read, "max_read", 1, MAX_READ_LIMIT)
        check_positive_setting(max_ttl_seconds, "max_ttl_seconds")
        if check_positive_setting(key_cache_seconds, "key_cache_seconds") > MAX_KEY_CACHE_SECONDS:
            raise InvalidArgument(f"key_cache_seconds must be at most {MAX_KEY_CACHE_SECONDS:g}")
        check_int(key_cache_size, "key_cache_size", 1, 1_000_000)
        if not callable(clock):
            raise InvalidArgument("clock must be a callable returning seconds")
        check_positive_setting(keyring_timeout, "keyring_timeout")
        keyring_store = KeyringStore(resolve_backend(keyring_backend), timeout=float(keyring_timeout))
        store = SqliteStore(paths.prepare(path))
        try:
            keys = _key_manager(store, keyring_store, key_cache_seconds, key_cache_size)
            keys.index_key()  # fail now, not on first use, when this vault's index key is missing or replaced
        except BaseException:
            store.close()
            raise
        return cls(store, keys, clock=clock, max_read=max_read, max_ttl_seconds=float(max_ttl_seconds))

    # -- writing ---------------------------------------------------------------------------------------
    @audited("put")
    def put(self, principal: Principal, turn_id: str, step_num: int, executor_name: str, observation: Any,
            ttl_seconds: float = 3600) -> Representation:
        """Encrypt and store an observation (str, bytes-like, JSON dict/list, or a readable file object)."""
        _check_principal(principal)
        check_identifier(turn_id, "turn_id")
        check_step(step_num)
        check_identifier(executor_name, "executor_name")
        ttl = check_ttl(ttl_seconds, self.max_ttl_seconds)
        kind = classify(observation)
        json_text = encode_json(observation) if kind == "json" else None
        created_at = self._now()
        expires_at = expiry(created_at, ttl)

        user_id = principal.user_id
        index = self._keys.index_key()
        owner_tag = index.owner_tag(user_id)
        turn_tag = index.turn_tag(owner_tag, turn_id)
        keyset = self._keyset_for_write(user_id, owner_tag)
        data_key = self._keys.new_data_key()
        digest = context_digest(user_id, turn_id, step_num, executor_name, kind)
        chunks = content_chunks(json_text or observation, text=kind != "binary")
        summary = SummaryBuilder(kind, observation if kind == "json" else None)

        with self._integrity_guard(), self._store.transaction() as tx:
            seq, recorded = self._store.next_row(tx, owner_tag, keyset.primary)
            if not self._keys.is_current(keyset, recorded):  # retired, shredded or re-created elsewhere
                keyset = self._keyset_locked(user_id, owner_tag)
            row_id = index.row_id(seq)  # the id names the seq, so it is made under the write lock
            context = RowContext(self._keys.vault_id, row_id)
            content_aad = chunk_aad(context, digest)
            chunk_units: list[int] = []
            size_bytes = 0
            for index_in_row, chunk in enumerate(chunks):
                sealed = data_key.seal_chunk(index_in_row, chunk.last, chunk.data, content_aad)
                self._store.insert_chunk(tx, seq, index_in_row, sealed)
                summary.feed(chunk)
                chunk_units.append(chunk.units)
                size_bytes += len(chunk.data)
            summary_text, retained = summary.finish()
            size_units = sum(chunk_units)
            metadata = Metadata(
                user_id=user_id, actor=principal.actor, channel=principal.channel, turn_id=turn_id,
                step_num=step_num, executor_name=executor_name, content_kind=kind, size_bytes=size_bytes,
                size_units=size_units, chunk_units=tuple(chunk_units), created_at=created_at,
                expires_at=expires_at,
            )
            header = RowHeader(
                seq=seq, row_id=row_id, owner_tag=owner_tag, turn_tag=turn_tag, key_version=keyset.primary,
                expires_at=expires_at, size_bytes=size_bytes,
                wrapped_key=keyset.wrap(data_key, wrap_aad(context, user_id, keyset.primary)),
                metadata=data_key.seal_metadata(
                    metadata.encode(), meta_aad(context, owner_tag, turn_tag, expires_at, size_bytes)),
            )
            record = SummaryRecord(step_num, executor_name, kind, size_units, created_at, summary_text, retained)
            sealed_summary = keyset.turn_key(keyset.primary, context.vault_id, turn_tag).seal_summary(
                record.encode(),
                summary_aad_v2(context, owner_tag, turn_tag, expires_at, size_bytes, keyset.primary))
            self._store.insert_row(tx, header, sealed_summary)
        self._count("puts")
        return _representation(row_id, size_bytes, expires_at, step_num, executor_name, kind, size_units,
                               created_at, summary_text, retained)

    @audited("delete")
    def delete(self, principal: Principal, id: str) -> None:
        """Delete one of the caller's rows (NotFound for anything else); nothing readable stays behind."""
        with self._integrity_guard(id), self._store.snapshot():
            header, _, _, _ = self._open_row(principal, id)
        if not self._store.delete_row(header.seq, header.row_id):
            raise NotFound()  # deleted by someone else between the check and the delete

    @audited("extend_turn")
    def extend_turn(self, principal: Principal, turn_id: str, ttl_seconds: float) -> int:
        """Make the caller's live rows of a turn live at least ``ttl_seconds`` more (a resumed dialog); returns
        how many were extended. Expired rows stay expired; no lifetime is shortened."""
        _check_principal(principal)
        check_identifier(turn_id, "turn_id")
        ttl = check_ttl(ttl_seconds, self.max_ttl_seconds)
        user_id = principal.user_id
        index = self._keys.index_key()
        owner_tag = index.owner_tag(user_id)
        extended = 0
        with self._integrity_guard(), self._store.transaction() as tx:
            now = self._now()  # after the write lock: a row that expired while we waited stays expired
            expires_at = expiry(now, ttl)
            for header, sealed in self._store.list_turn(owner_tag, index.turn_tag(owner_tag, turn_id), now):
                if header.expires_at >= expires_at:
                    continue
                data_key, metadata, context = self._unseal(user_id, header)
                record = self._summary(user_id, header, data_key, context, sealed)
                metadata = dataclasses.replace(metadata, expires_at=expires_at)
                # expiry is in both AADs, so both are sealed again, each under a fresh random nonce (a format 1
                # summary is written back in format 2, under the turn key of the row's key version)
                turn_key = self._turn_key(user_id, header.key_version, header.turn_tag)
                self._store.update_expiry(
                    tx, header.seq, expires_at,
                    data_key.seal_metadata(metadata.encode(), meta_aad(
                        context, header.owner_tag, header.turn_tag, expires_at, header.size_bytes)),
                    turn_key.seal_summary(record.encode(), summary_aad_v2(
                        context, header.owner_tag, header.turn_tag, expires_at, header.size_bytes,
                        header.key_version)),
                )
                extended += 1
        return extended

    @audited("gc")
    def gc(self, now: float | None = None, *, progress: Callable[[int], None] | None = None) -> int:
        """Delete every row expired at ``now`` (default: the clock); returns how many were removed.
        ``progress`` is called with the running total after each committed batch."""
        moment = self._now() if now is None else check_time(now)
        check_progress(progress)
        return self._store.delete_expired(moment, progress)

    # -- reading ---------------------------------------------------------------------------------------
    @audited("get")
    def get(self, principal: Principal, id: str, *, turn_id: str | None = None) -> Record:
        """The complete row, content decrypted (for the engine; a model reads through ``read``). With
        ``turn_id``, a row of another turn is NotFound too."""
        with self._integrity_guard(id), self._store.snapshot():
            header, data_key, metadata, context = self._open_row(principal, id, turn_id)
            last = len(metadata.chunk_units) - 1
            pieces = self._plaintexts(header, data_key, metadata, context, _digest(metadata), 0, last)
            if metadata.content_kind == "binary":
                content: Any = b"".join([bytes(piece) for piece in pieces])
            else:  # chunks are cut on character boundaries, so each decodes alone
                content = "".join([str(piece, "utf-8", "replace") for piece in pieces])
            record = self._summary(principal.user_id, header, data_key, context, self._store.read_summary(header.seq))
            if (record.step_num, record.executor_name, record.content_kind, record.size_units) != (
                    metadata.step_num, metadata.executor_name, metadata.content_kind, metadata.size_units):
                raise IntegrityError("a row's summary does not match its metadata")
            if metadata.content_kind == "json":
                content = json.loads(content)
            self._count("reads")
            return Record(
                id=header.row_id.hex(), owner=Principal(metadata.user_id, metadata.actor, metadata.channel),
                turn_id=metadata.turn_id, step_num=metadata.step_num, executor_name=metadata.executor_name,
                content_kind=metadata.content_kind, content=content, size_bytes=metadata.size_bytes,
                summary=record.summary, retained=record.retained, created_at=metadata.created_at,
                expires_at=metadata.expires_at, key_version=header.key_version,
            )

    @audited("read")
    def read(self, principal: Principal, id: str, mode: str = "head", n: int = 2000, start: int | None = None,
             end: int | None = None, *, turn_id: str | None = None) -> ReadResult:
        """A slice of a row, at most ``max_read`` units, decrypting only the chunks that hold it. With
        ``turn_id``, a row of another turn is NotFound too (checked with the owner, before any decryption)."""
        mode, n, start, end = check_read_args(mode, n, start, end)
        with self._integrity_guard(id), self._store.snapshot():
            header, data_key, metadata, context = self._open_row(principal, id, turn_id)
            wanted = plan(mode, n, start, end, metadata.size_units, self.max_read)
            content = ""
            if wanted.end > wanted.start:
                first, last, offset = chunk_span(metadata.chunk_units, wanted.start, wanted.end)
                raw = self._content(header, data_key, metadata, context, _digest(metadata), first, last)
                if metadata.content_kind == "binary":
                    content = base64.b64encode(raw[wanted.start - offset:wanted.end - offset]).decode()
                else:
                    content = raw.decode("utf-8", "replace")[wanted.start - offset:wanted.end - offset]
            self._count("reads")
            return ReadResult(
                id=header.row_id.hex(), content=content, content_kind=metadata.content_kind, mode=mode,
                full_size=metadata.size_units, returned_size=wanted.end - wanted.start, truncated=wanted.truncated,
                start=wanted.start, end=wanted.end,
            )

    @audited("list")
    def list_for_turn(self, principal: Principal, turn_id: str) -> list[Representation]:
        """Representations of the caller's unexpired rows in a turn, by step number; summaries only."""
        _check_principal(principal)
        check_identifier(turn_id, "turn_id")
        user_id = principal.user_id
        index = self._keys.index_key()
        owner_tag = index.owner_tag(user_id)
        turn_tag = index.turn_tag(owner_tag, turn_id)
        vault_id = self._keys.vault_id
        aad_of = summary_aads_v2(vault_id, owner_tag, turn_tag)
        with self._integrity_guard(), self._store.snapshot():
            found = []
            turn_keys: dict[int, TurnKey] = {}
            rows = self._store.list_turn_summaries(owner_tag, turn_tag, self._now())
            if self._store.ids_name_seqs and index.row_seqs(list(map(_ROW_ID, rows))) != list(map(_SEQ, rows)):
                raise IntegrityError("a listed row is not where its id says")  # moved or copied: no id reaches it
            for seq, row_id, version, expires_at, size_bytes, sealed in rows:
                if sealed[0] == SUMMARY_V2:  # one AES-GCM open per row, under the turn's key: no unwrap
                    # the key that opened it is kept for the turn's next rows (a reloaded one, if it was stale)
                    plain, turn_keys[version] = self._open_v2_summary(
                        user_id, version, turn_tag, sealed, aad_of(row_id, expires_at, size_bytes, version),
                        turn_keys.get(version))
                    fields = summary_fields(plain)
                else:  # format 1: under the row's DEK
                    context = RowContext(vault_id, row_id)
                    data_key = self._unwrap(user_id, version, self._store.wrapped_key(seq), context)
                    record = _open_v1_summary(data_key, context, owner_tag, turn_tag, expires_at, size_bytes, sealed)
                    fields = (record.step_num, record.executor_name, record.content_kind, record.size_units,
                              record.created_at, record.summary, record.retained)
                found.append(_representation(row_id, size_bytes, expires_at, *fields))
            found.sort(key=_LISTING_ORDER)
            return found

    def has_rows(self, principal: Principal, turn_id: str) -> bool:
        """Whether the caller has readable (unexpired) rows in a turn; decrypts nothing (offer the tool or not)."""
        _check_principal(principal)
        check_identifier(turn_id, "turn_id")
        index = self._keys.index_key()
        owner_tag = index.owner_tag(principal.user_id)
        return self._store.turn_has_rows(owner_tag, index.turn_tag(owner_tag, turn_id), self._now())

    def stats(self) -> dict[str, Any]:
        """Counts of rows and bytes stored (in all and by key version), expired-but-uncollected rows, and this
        process's counters (reads, denials, integrity failures since open)."""
        with self._counter_lock:
            counters = dict(self._counters)
        return {**self._store.stats(self._now()), "counters": counters, "keyring_backend": self._keys.backend_name}

    # -- lifecycle -------------------------------------------------------------------------------------
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
    def _open_row(self, principal: Principal, id: str, turn_id: str | None = None) -> _OPEN_ROW:
        """Look up -> check owner, turn (when asked) and expiry (NotFound) -> only then fetch the key and
        decrypt."""
        _check_principal(principal)
        if turn_id is not None:
            check_identifier(turn_id, "turn_id")
        row_id = parse_row_id(id)
        index = self._keys.index_key()
        header = self._store.find_row(row_id, index.row_seq(row_id)) if row_id is not None else None
        owner_tag = index.owner_tag(principal.user_id)
        mine = header is not None and tags_equal(header.owner_tag, owner_tag) and (
            turn_id is None or tags_equal(header.turn_tag, index.turn_tag(owner_tag, turn_id)))
        if header is None or not mine or header.expires_at <= self._now():
            self._count("denied")
            audit.note(denied=header is not None and not mine)  # only the operator's audit trail tells these apart
            log.info("scratchvault: access denied or no such row")
            raise NotFound()
        data_key, metadata, context = self._unseal(principal.user_id, header)
        return header, data_key, metadata, context

    def _unwrap(self, user_id: str, version: int, wrapped: bytes, context: RowContext) -> DataKey:
        """Unwrap the data key of a row whose ownership was already checked (it only unwraps for its owner)."""
        keyset = self._keyset_for_read(user_id, version)
        aad = wrap_aad(context, user_id, version)
        try:
            return keyset.unwrap(version, wrapped, aad)
        except IntegrityError:
            # A cached keyset may be stale (the owner shredded and re-created in another process, so version
            # numbers restarted): reload once, and only a key that still fails is reported as tampering.
            fresh = self._keys.owner_keyset(user_id, refresh=True)
            if fresh is None:
                raise
            return fresh.unwrap(version, wrapped, aad)

    def _turn_key(self, user_id: str, version: int, turn_tag: bytes) -> TurnKey:
        """The summary key of one of the owner's turns under ``version`` (ownership already checked)."""
        return self._keyset_for_read(user_id, version).turn_key(version, self._keys.vault_id, turn_tag)

    def _open_v2_summary(self, user_id: str, version: int, turn_tag: bytes, sealed: bytes, aad: bytes,
                         turn_key: TurnKey | None = None) -> tuple[bytes, TurnKey]:
        """Open a format 2 summary (ownership already checked) under ``turn_key`` or the cached keyset's; like
        ``_unwrap``, a failure reloads the keyset once (it may be stale), and only a summary that still fails is
        reported as tampering. Returns the plaintext and the key that opened it."""
        if turn_key is None:
            turn_key = self._turn_key(user_id, version, turn_tag)
        try:
            return turn_key.open_summary(sealed, aad), turn_key
        except IntegrityError:
            fresh = self._keys.owner_keyset(user_id, refresh=True)
            if fresh is None:
                raise
            turn_key = fresh.turn_key(version, self._keys.vault_id, turn_tag)
            return turn_key.open_summary(sealed, aad), turn_key

    def _unseal(self, user_id: str, header: RowHeader) -> tuple[DataKey, Metadata, RowContext]:
        """Unwrap the data key and open the metadata of a row whose ownership was already checked."""
        context = RowContext(self._keys.vault_id, header.row_id)
        data_key = self._unwrap(user_id, header.key_version, header.wrapped_key, context)
        aad = meta_aad(context, header.owner_tag, header.turn_tag, header.expires_at, header.size_bytes)
        metadata = Metadata.decode(data_key.open_metadata(header.metadata, aad))
        if (metadata.user_id != user_id or metadata.expires_at != header.expires_at
                or metadata.size_bytes != header.size_bytes):
            raise IntegrityError("row metadata does not match the stored row")
        return data_key, metadata, context

    def _content(self, header: RowHeader, data_key: DataKey, metadata: Metadata, context: RowContext,
                 digest: bytes, first: int, last: int) -> bytearray:
        """Chunks first..last opened into one buffer (a slice's few chunks)."""
        plain = bytearray()
        for piece in self._plaintexts(header, data_key, metadata, context, digest, first, last):
            plain += piece
        return plain

    def _plaintexts(self, header: RowHeader, data_key: DataKey, metadata: Metadata, context: RowContext,
                    digest: bytes, first: int, last: int) -> Iterator[memoryview]:
        """Open chunks first..last in order, each into one reused buffer: a view is valid only until the next
        is asked for (decode or copy it first). A missing, extra or altered chunk is an IntegrityError.
        Chunks are fetched and opened one at a time, so a full read never holds every sealed chunk, nor a
        plaintext buffer of the whole row: at its peak, the decoded pieces and the result joined from them
        (about twice the row, where the old path held three row-sized buffers)."""
        aad = chunk_aad(context, digest)
        final = len(metadata.chunk_units) - 1
        binary = metadata.content_kind == "binary"
        buffer = memoryview(bytearray(CHUNK_BYTES))
        expected = first
        with closing(self._store.read_chunks(header.seq, first, last)) as sealed:
            for index, blob in sealed:
                if index != expected:
                    raise IntegrityError("a content chunk is missing")
                size = len(blob) - TAG_SIZE
                if not 0 <= size <= CHUNK_BYTES or (binary and size != metadata.chunk_units[index]):
                    raise IntegrityError("a content chunk has the wrong size")
                out = buffer[:size]
                data_key.open_chunk_into(index, index == final, blob, aad, out)
                yield out
                expected += 1
        if expected != last + 1:
            raise IntegrityError("a content chunk is missing")

    def _summary(self, user_id: str, header: RowHeader, data_key: DataKey, context: RowContext,
                 sealed: bytes | None) -> SummaryRecord:
        """Open a row's summary record (bound to the row's clear columns like the metadata): format 2 under
        the turn key of the row's key version, format 1 under the row's DEK."""
        if not sealed:
            raise IntegrityError("a row's summary is missing")
        if sealed[0] == SUMMARY_V2:
            aad = summary_aad_v2(context, header.owner_tag, header.turn_tag, header.expires_at, header.size_bytes,
                                 header.key_version)
            return SummaryRecord.decode(self._open_v2_summary(user_id, header.key_version, header.turn_tag, sealed,
                                                              aad)[0])
        return _open_v1_summary(data_key, context, header.owner_tag, header.turn_tag, header.expires_at,
                                header.size_bytes, sealed)

    # -- owner keys ------------------------------------------------------------------------------------
    def _keyset_for_read(self, user_id: str, version: int) -> OwnerKeyset:
        keyset = self._keys.owner_keyset(user_id)
        if keyset is not None and version not in keyset.versions:
            keyset = self._keys.owner_keyset(user_id, refresh=True)  # rotated elsewhere?
        if keyset is None:
            raise KeyUnavailable(
                "the OS keyring holds no keys for this owner although the vault holds rows for them "
                "(wrong keyring, or the entry was deleted); restore the keyring from backup. A new key is "
                "never generated over existing rows"
            )
        return keyset

    def _keyset_for_write(self, user_id: str, owner_tag: bytes) -> OwnerKeyset:
        keyset = self._keys.owner_keyset(user_id)
        if keyset is not None:
            return keyset
        with self._store.transaction():  # the write lock serialises first-key creation across processes
            return self._keyset_locked(user_id, owner_tag)

    def _keyset_locked(self, user_id: str, owner_tag: bytes) -> OwnerKeyset:
        """The owner's keyset from the keyring, or a new one for an owner the vault has never seen (the
        caller holds the write lock). A missing keyset for a known owner is an error, never a new key."""
        keyset = self._keys.owner_keyset(user_id, refresh=True)
        if keyset is not None:
            return keyset
        if self._store.owner_has_rows(owner_tag) or self._store.owner_checks(owner_tag):
            raise KeyUnavailable(
                "the OS keyring holds no keys for an owner this vault already knows; restore the "
                "keyring from backup (a new key would orphan that owner's rows)"
            )
        return self._keys.create_owner_keyset(user_id)

    # -- small helpers ---------------------------------------------------------------------------------
    def _now(self) -> float:
        return check_time(self._clock())

    def _count(self, name: str) -> None:
        with self._counter_lock:
            self._counters[name] += 1

    @contextmanager
    def _integrity_guard(self, id: object = None) -> Iterator[None]:
        """Count and log every IntegrityError of a read-side call. Never delete: a wrong key or a damaged
        row must not look like an expired one (an agent store once erased a user's history that way)."""
        try:
            yield
        except IntegrityError:
            self._count("integrity_failures")
            row = id if isinstance(id, str) and parse_row_id(id) is not None else "-"
            log.warning("scratchvault: integrity failure (row %s); nothing was deleted", row)
            raise


def _key_manager(store: SqliteStore, keyring: KeyringStore, cache_seconds: float, cache_size: int) -> KeyManager:
    """The key manager of this database; a new database gets its vault id and index key atomically."""
    existing = store.get_meta("vault_id")
    if existing is not None:
        return KeyManager(keyring, existing, store, cache_ttl=cache_seconds, cache_size=cache_size)
    with store.transaction() as tx:
        existing = store.get_meta("vault_id")
        if existing is not None:
            return KeyManager(keyring, existing, store, cache_ttl=cache_seconds, cache_size=cache_size)
        if not store.is_empty():
            raise IntegrityError("the database holds rows or keys but no vault id; refusing to start a new vault "
                                 "over them (restore the database from backup)")
        keys = KeyManager(keyring, random_bytes(16), store, cache_ttl=cache_seconds, cache_size=cache_size)
        keys.create_index_key()
        store.put_meta(tx, "vault_id", keys.vault_id)
    return keys


def _check_principal(principal: object) -> None:
    if not isinstance(principal, Principal):
        raise InvalidArgument(f"principal must be a Principal, not {type(principal).__name__}")


def _digest(metadata: Metadata) -> bytes:
    return context_digest(metadata.user_id, metadata.turn_id, metadata.step_num, metadata.executor_name,
                          metadata.content_kind)


def _open_v1_summary(data_key: DataKey, context: RowContext, owner_tag: bytes, turn_tag: bytes, expires_at: float,
                     size_bytes: int, sealed: bytes) -> SummaryRecord:
    """Open a format 1 summary: JSON, under the row's DEK (rows written before format 2)."""
    return SummaryRecord.decode_v1(data_key.open_summary(
        sealed, summary_aad(context, owner_tag, turn_tag, expires_at, size_bytes)))


def _representation(row_id: bytes, size_bytes: int, expires_at: float, step_num: int, executor_name: str,
                    content_kind: str, size_units: int, created_at: float, summary: str,
                    retained: dict[str, Any]) -> Representation:
    """What the model sees of a row: the clear columns it needs and its summary record's fields (in
    SummaryRecord's order), with the hint that tells it how to read more."""
    row = row_id.hex()
    unit = "bytes" if content_kind == "binary" else "chars"
    hint = (f'Call scratchpad_read with {{"id": "{row}", "mode": "head", "n": 2000}} (or "tail", or "range" '
            f'with start/end) to read a slice; the full content is {size_units:,} {unit}.')
    return new_representation(row, content_kind, size_bytes, summary, hint, step_num, executor_name, created_at,
                              expires_at, retained)
