"""A turn's listing: the representations of an owner's unexpired rows in a turn, by step number, built from their
summaries alone (no content or metadata is opened). The owner and turn are matched by their tags in the store;
rows the owner's ledger of deleted rows names (written back after their delete) and rows whose epoch key was
destroyed are left out, as expired rows are."""

from __future__ import annotations

import operator
from collections.abc import Callable
from functools import partial

from keys import KeyManager, RowRecipe
from vault.counters import Counters
from vault.deletions import Deletions
from vault.model import Representation, representation
from vault.row.format import record_fields, summary_fields
from vault.storage import Store

_LISTING_ORDER = operator.attrgetter("step_num", "created_at")  # in C: a listing sorts up to thousands


class TurnListing:
    """Lists a vault's turns: made once per vault over its store, keys, row recipe, deletions, counters, clock."""

    def __init__(self, store: Store, keys: KeyManager, recipe: RowRecipe, deletions: Deletions, counters: Counters,
                 now: Callable[[], float]) -> None:
        self._store, self._keys, self._recipe, self._deletions = store, keys, recipe, deletions
        self._counters, self._now = counters, now

    def has_rows(self, user_id: str, turn_id: str) -> bool:
        """Whether ``user_id`` has unexpired rows in ``turn_id``; decrypts nothing."""
        index = self._keys.index_key()
        owner_tag = index.owner_tag(user_id)
        with self._store.snapshot() as reads:
            return reads.turn_has_rows(owner_tag, index.turn_tag(owner_tag, turn_id), self._now())

    def list(self, user_id: str, turn_id: str) -> list[Representation]:
        """The representations of ``user_id``'s unexpired rows in ``turn_id`` (both already validated)."""
        index = self._keys.index_key()
        owner_tag = index.owner_tag(user_id)
        turn_tag = index.turn_tag(owner_tag, turn_id)
        summaries = self._recipe.turn_summaries(user_id, owner_tag, turn_tag)
        found = []
        with self._counters.integrity_guard(), self._store.snapshot() as reads:
            open_summary, wrapped_key = summaries.open, partial(reads.wrapped_key, owner_tag)  # bound once
            deleted = self._deletions.named(reads, index, owner_tag).entries  # rows written back after their delete
            for seq, row_id, version, expires_at, size_bytes, sealed in reads.list_turn_summaries(
                    owner_tag, turn_tag, self._now(), index.row_seqs):
                if row_id in deleted:
                    continue
                opened = open_summary((seq, row_id, version, expires_at, size_bytes, sealed), wrapped_key)
                if opened is None:  # its epoch key was destroyed: gone, as an expired row
                    continue
                plain, legacy = opened
                fields = record_fields(plain, True) if legacy else summary_fields(plain)
                found.append(representation(row_id, size_bytes, expires_at, fields))
        found.sort(key=_LISTING_ORDER)
        return found
