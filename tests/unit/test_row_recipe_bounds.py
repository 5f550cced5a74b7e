"""The row recipe's own checks and refusals (keys/recipe.py; threat_model.md, "Cryptography" and "Expiry epochs"),
without a Vault or a database: the exact size of each binary chunk, a missing summary, a row without a marked last
chunk, a key version the owner's keyset lacks, the one reload of a stale cached keyset (and only one), the key
version resealing asks for, the epoch checks at their boundaries (an epoch that ends at ``now``, a row naming an
epoch with no key before and from its end, a commitment the write transaction no longer finds), each with its exact
refusal text and the exact calls made to the key manager.

The epochs are the real ``EpochKeys`` of a real ``KeyManager`` on the in-memory keyring, over a small double of the
epoch records; the owner keysets come from ``OwnerKeys``, a double of the manager's two owner-keyset reads that
keeps the real manager's cache rule (keys/manager.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from keys import CacheLimits, KeyManager, KeyringEdge, NewRow, OwnerKeyset, RowRecipe, SealingEpoch
from keys.epochs.epoch_key import EpochKey, epoch_name
from keys.epochs.marks import EpochMark
from keys.epochs.schedule import Epoch, epoch_end
from keys.errors import IntegrityError, KeyUnavailable, NotFound
from keys.recipe import EPOCH_CLOSED
from keys.testing import MemoryKeyring

VAULT_ID, ROW_ID = bytes(range(16)), bytes(16)
OWNER_TAG, TURN_TAG = b"o" * 32, b"t" * 32
E = 3600
EXPIRES, LATER = 2e9, 2e9 + 2 * E
EPOCH, LATER_EPOCH = (E, int(EXPIRES) // E), (E, int(LATER) // E)
END = epoch_end(EPOCH[1], E)
SERVICE = f"scratchvault/{VAULT_ID.hex()}/epoch-key"
PIECES = [b"a" * 100, b"b" * 100, b"c" * 40]
MISSING_VERSION = "row refers to a key version this owner's keyset does not hold"
ALTERED_EXPIRY = "a row names an expiry epoch that has no key before its end (its expiry was altered)"


class EpochTable:
    """The epoch records a read asks for: the recorded (attempt, commitment) by epoch; counts the reads."""

    def __init__(self) -> None:
        self.recorded: dict[Epoch, tuple[int, bytes]] = {}
        self.reads = 0

    def epoch_commitment(self, length: int, epoch: int) -> tuple[int, bytes] | None:
        self.reads += 1
        return self.recorded.get((length, epoch))


class OwnerKeys:
    """What the recipe asks of a key manager for one owner, with the real manager's cache rule: ``keyset_for_read``
    serves the cached keyset unless it lacks the version asked for, then loads once; ``owner_keyset`` loads only
    with ``refresh``. A load finds ``stored`` (None: the owner has no keys) and caches it. ``asked`` records each
    call with its arguments, and each load."""

    def __init__(self, manager: KeyManager, cached: OwnerKeyset, stored: OwnerKeyset | None) -> None:
        self.vault_id, self.epochs = manager.vault_id, manager.epochs
        self.cached, self.stored = cached, stored
        self.asked: list[tuple[object, ...]] = []

    def keyset_for_read(self, user_id: str, version: int) -> OwnerKeyset:
        self.asked.append(("keyset_for_read", user_id, version))
        keyset = self.cached if version in self.cached.versions else self._load()
        if keyset is None:
            raise KeyUnavailable("the OS keyring holds no keys for this owner")
        return keyset

    def owner_keyset(self, user_id: str, *, refresh: bool = False) -> OwnerKeyset | None:
        self.asked.append(("owner_keyset", user_id, refresh))
        return self._load() if refresh else self.cached

    def _load(self) -> OwnerKeyset | None:
        self.asked.append(("load",))
        if self.stored is not None:
            self.cached = self.stored
        return self.stored


class Scene:
    """A real key manager whose epoch records hold the keys of EPOCH and LATER_EPOCH (entries in its keyring; it
    holds no owner key, so a recipe that opens rows is given an ``OwnerKeys``), and the recipes' clock, ``now``
    (an epoch before EXPIRES unless a test moves it)."""

    def __init__(self) -> None:
        self.ring, self.records, self.now = MemoryKeyring(), EpochTable(), EXPIRES - E
        self.edge = KeyringEdge(self.ring, timeout=5)
        self.manager = KeyManager(self.edge, VAULT_ID, self.records, cache=CacheLimits(60, 64), epoch_seconds=E)
        self.keys = {epoch: self.record(epoch) for epoch in (EPOCH, LATER_EPOCH)}
        self.puts = {epoch: SealingEpoch(epoch, key) for epoch, key in self.keys.items()}

    def record(self, epoch: Epoch) -> EpochKey:
        key = EpochKey.generate()
        self.edge.set(SERVICE, epoch_name(*epoch, 1), key.entry())
        self.records.recorded[epoch] = (1, key.commitment(VAULT_ID, *epoch))
        return key

    def recipe(self, keys: object | None = None) -> RowRecipe:
        return RowRecipe(keys or self.manager, now=lambda: self.now)  # type: ignore[arg-type]


def sealed_row(recipe: RowRecipe, keyset: OwnerKeyset, put: SealingEpoch, kind: str = "binary"):
    """A row of three chunks as put seals it: (the stored row, its sealed chunks, its metadata facts)."""
    writer = recipe.writer(keyset, NewRow("alice", OWNER_TAG, ROW_ID, "turn", 1, "tool", kind), put)
    chunks = [writer.seal_chunk(piece, index == len(PIECES) - 1) for index, piece in enumerate(PIECES)]
    size = sum(map(len, PIECES))
    wrapped, metadata, summary = writer.finish(OWNER_TAG, TURN_TAG, EXPIRES, size, b"meta", b"summary")
    row = SimpleNamespace(row_id=ROW_ID, owner_tag=OWNER_TAG, turn_tag=TURN_TAG, key_version=keyset.primary,
                          expires_at=EXPIRES, size_bytes=size, wrapped_key=wrapped, metadata=metadata)
    facts = SimpleNamespace(user_id="alice", turn_id="turn", step_num=1, executor_name="tool", content_kind=kind,
                            chunk_units=tuple(map(len, PIECES)))
    return row, chunks, facts, summary


def message(error: pytest.ExceptionInfo[BaseException]) -> str:
    return str(error.value)


def test_binary_chunks_open_only_at_the_sizes_the_metadata_records_text_chunks_at_any():
    """A binary row's recorded units are its chunks' byte sizes, and a slice's offsets come from them; a text row's
    count characters, so only a binary chunk is held to its recorded size."""
    scene, keyset = Scene(), OwnerKeyset.generate()
    for kind in ("binary", "text"):
        row, chunks, facts, _ = sealed_row(scene.recipe(), keyset, scene.puts[EPOCH], kind)
        facts.chunk_units = (100, 100, 39)
        opened = scene.recipe(OwnerKeys(scene.manager, keyset, keyset)).open("alice", row)
        if kind == "text":
            assert [bytes(view) for view in opened.chunks(enumerate(chunks), 0, 2, facts)] == PIECES
            continue
        returned: list[bytes] = []
        with pytest.raises(IntegrityError) as error:
            returned.extend(bytes(view) for view in opened.chunks(enumerate(chunks), 0, 2, facts))
        assert message(error) == "a content chunk has the wrong size"
        assert returned == PIECES[:2]  # the chunks before it, never a byte of the one of the wrong size


def test_a_row_without_a_summary_record_is_an_integrity_error_that_says_so():
    scene, keyset = Scene(), OwnerKeyset.generate()
    row, _, _, summary = sealed_row(scene.recipe(), keyset, scene.puts[EPOCH])
    opened = scene.recipe(OwnerKeys(scene.manager, keyset, keyset)).open("alice", row)
    assert opened.summary(summary) == (b"summary", False)
    for absent in (None, b""):
        with pytest.raises(IntegrityError) as error:
            opened.summary(absent)
        assert message(error) == "a row's summary is missing"


def test_a_row_without_a_marked_last_chunk_is_refused_at_finish_with_the_reason():
    scene, keyset = Scene(), OwnerKeyset.generate()
    writer = scene.recipe().writer(keyset, NewRow("alice", OWNER_TAG, ROW_ID, "turn", 1, "tool", "text"),
                                   scene.puts[EPOCH])
    writer.seal_chunk(b"first", False)
    with pytest.raises(IntegrityError) as error:
        writer.finish(OWNER_TAG, TURN_TAG, EXPIRES, 5, b"meta", b"summary")
    assert message(error) == "a row can't end without a marked last chunk"


def test_a_key_version_the_keyset_lacks_after_its_reload_is_tampering_before_any_unwrap():
    scene, first, second = Scene(), OwnerKeyset.generate(1), OwnerKeyset.generate(2)
    row, _, _, _ = sealed_row(scene.recipe(), second, scene.puts[EPOCH])
    keys = OwnerKeys(scene.manager, cached=first, stored=first)
    with pytest.raises(IntegrityError) as error:
        scene.recipe(keys).open("alice", row)
    assert message(error) == MISSING_VERSION
    assert keys.asked == [("keyset_for_read", "alice", 2), ("load",)]  # no second reload: no attempt was made


def test_a_stale_cached_keyset_is_reloaded_once_and_the_row_opens_under_the_fresh_one():
    """The cached keyset holds the row's version under another key (the owner was shredded and made again by
    another process): the unwrap fails, the keyset is loaded once, bypassing the cache, and the row opens."""
    scene, stored = Scene(), OwnerKeyset.generate()
    row, _, _, _ = sealed_row(scene.recipe(), stored, scene.puts[EPOCH])
    keys = OwnerKeys(scene.manager, cached=OwnerKeyset.generate(), stored=stored)
    assert scene.recipe(keys).open("alice", row).metadata == b"meta"
    assert keys.asked == [("keyset_for_read", "alice", 1), ("owner_keyset", "alice", True), ("load",)]


def test_a_row_that_fails_under_the_fresh_keyset_too_is_tampering_after_one_reload():
    scene, keyset = Scene(), OwnerKeyset.generate()
    row, _, _, _ = sealed_row(scene.recipe(), keyset, scene.puts[EPOCH])
    row.wrapped_key = row.wrapped_key[:-1] + bytes([row.wrapped_key[-1] ^ 1])
    for stored in (keyset, None):  # reloaded, or the owner's keys gone meanwhile: the unwrap's own error
        keys = OwnerKeys(scene.manager, cached=keyset, stored=stored)
        with pytest.raises(IntegrityError) as error:
            scene.recipe(keys).open("alice", row)
        assert message(error) == "ciphertext failed authentication"
        assert keys.asked == [("keyset_for_read", "alice", 1), ("owner_keyset", "alice", True), ("load",)]


def test_resealing_asks_for_the_keyset_of_the_rows_own_version_and_loads_nothing():
    scene, keyset = Scene(), OwnerKeyset.generate()
    row, _, _, _ = sealed_row(scene.recipe(), keyset, scene.puts[EPOCH])
    keys = OwnerKeys(scene.manager, cached=keyset, stored=keyset)
    opened = scene.recipe(keys).open("alice", row)
    keys.asked.clear()
    wrapped, metadata, _ = opened.reseal(LATER, b"meta", b"summary", scene.puts[LATER_EPOCH])
    assert keys.asked == [("keyset_for_read", "alice", 1)]
    moved = SimpleNamespace(**{**vars(row), "expires_at": LATER, "wrapped_key": wrapped, "metadata": metadata})
    assert scene.recipe(keys).open("alice", moved).metadata == b"meta"


def test_an_epoch_that_has_ended_at_now_gets_no_key_and_the_refusal_says_to_correct_the_clock():
    scene = Scene()
    with pytest.raises(KeyUnavailable) as error:
        scene.recipe().epoch_for(EXPIRES, END)
    assert message(error) == EPOCH_CLOSED
    epoch, key = scene.recipe().epoch_for(EXPIRES, END - 1)  # a second earlier: the recorded key
    assert epoch == EPOCH and key.commitment(VAULT_ID, *EPOCH) == scene.records.recorded[EPOCH][1]


def test_an_epoch_without_a_key_is_an_altered_expiry_before_its_end_and_gone_from_its_end():
    scene = Scene()
    del scene.records.recorded[EPOCH]
    recipe = scene.recipe()
    scene.now = END - 1
    with pytest.raises(IntegrityError) as error:
        recipe.epoch_key(EPOCH)
    assert message(error) == ALTERED_EXPIRY
    scene.now = END
    with pytest.raises(NotFound):
        recipe.epoch_key(EPOCH)
    scene.now = END - 1
    assert EpochMark(scene.edge, SERVICE).raise_to(E, EPOCH[1])  # destroyed, by the keyring's marker
    with pytest.raises(NotFound):
        recipe.epoch_key(EPOCH)


def test_a_put_whose_transaction_finds_no_commitment_or_another_does_not_wrap_and_drops_the_cached_key():
    scene = Scene()
    recipe, put = scene.recipe(), scene.puts[EPOCH]
    commitment = scene.records.recorded[EPOCH][1]
    assert recipe.epoch_key(EPOCH) is not None and scene.records.reads == 1  # cached from here on
    assert recipe.epoch_recorded(put, commitment)
    recipe.epoch_key(EPOCH)
    assert scene.records.reads == 1
    for found in (None, scene.keys[LATER_EPOCH].commitment(VAULT_ID, *EPOCH)):
        assert recipe.epoch_recorded(put, found) is False
        reads = scene.records.reads
        recipe.epoch_key(EPOCH)  # not from the cache: the records are asked again
        assert scene.records.reads == reads + 1
