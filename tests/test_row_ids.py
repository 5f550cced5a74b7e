"""Row ids: one AES-256 block of (seq, 64 random bits) under a key derived from the index key (threat_model.md,
"Row ids"). They must look random, be unique, reach only the row they were made for, and never reach a newer
row that reuses a deleted row's seq, nor a row of another vault."""

from __future__ import annotations

import pickle

import pytest

from keys.aead import BlockPermutation
from keys.blind_index import IndexKey
from keys.errors import IntegrityError
from keys.testing import MemoryKeyring
from tests.support.sqlite_files import seq_of
from vault import NotFound, Vault


def test_aes_256_known_answer_fips_197_appendix_c3():
    permutation = BlockPermutation(bytes(range(32)))
    plain, cipher = bytes.fromhex("00112233445566778899aabbccddeeff"), bytes.fromhex("8ea2b7ca516745bfeafc49904b496089")
    assert permutation.encrypt(plain) == cipher
    assert permutation.decrypt(cipher) == plain


@pytest.mark.parametrize("size", [0, 15, 17, 32])
def test_block_permutation_takes_exactly_one_block(size):
    permutation = BlockPermutation(bytes(32))
    for call in (permutation.encrypt, permutation.decrypt):
        with pytest.raises(IntegrityError):
            call(bytes(size))
    with pytest.raises(IntegrityError):
        BlockPermutation(bytes(16))
    with pytest.raises(TypeError):
        pickle.dumps(permutation)
    assert "AES-256" in repr(permutation) and "00" not in repr(permutation)


def test_an_id_names_its_seq_and_fresh_ids_for_one_seq_differ():
    index = IndexKey(bytes(range(32)))
    for seq in (1, 2, 1000, (1 << 43) - 1):
        ids = {index.row_id(seq) for _ in range(50)}
        assert len(ids) == 50 and all(len(i) == 16 and index.row_seq(i) == seq for i in ids)
    assert IndexKey(bytes(32)).row_seq(index.row_id(7)) != 7  # another index key reads another seq


def test_ids_are_unique_and_do_not_follow_the_order_of_puts(vault, alice, db_path):
    ids = [vault.put(alice, "t", step, "x", "o").id for step in range(300)]
    assert len(set(ids)) == 300
    assert ids != sorted(ids) and ids != sorted(ids, reverse=True)
    prefixes = {i[:4] for i in ids}  # sequential seqs, yet the ids' first 16 bits spread out
    assert len(prefixes) > 250
    assert [seq_of(db_path, i) for i in ids] == list(range(1, 301))


def test_a_deleted_rows_id_does_not_reach_the_row_that_reuses_its_seq(vault, alice, bob, db_path):
    keep = vault.put(alice, "t", 1, "x", "kept").id
    for owner in (alice, bob):
        gone = vault.put(owner, "t", 2, "x", "deleted").id
        vault.delete(owner, gone)
        newer = vault.put(alice, "t", 3, "x", "newer").id
        assert seq_of(db_path, newer) == 2  # the deleted row's seq, taken again
        for who in (alice, bob):
            with pytest.raises(NotFound):
                vault.get(who, gone)
            with pytest.raises(NotFound):
                vault.read(who, gone, mode="head", n=5)
        assert vault.get(alice, newer).content == "newer"
        vault.delete(alice, newer)
    assert vault.get(alice, keep).content == "kept"


def test_another_vaults_id_for_the_same_seq_is_not_found(tmp_path, alice):
    """Under this vault's key another vault's id names an unrelated seq (almost surely past the last possible
    one); an id that does name a live seq must still match it whole (test_row_id_attacks.py crafts those)."""
    directories = [tmp_path / name for name in ("a", "b")]
    vaults = []
    for directory in directories:
        directory.mkdir(mode=0o700)
        vaults.append(Vault.open(directory / "v.db", keyring_backend=MemoryKeyring()))
    first, second = (v.put(alice, "t", 1, "x", name).id for v, name in zip(vaults, "ab", strict=True))
    assert first != second
    assert seq_of(directories[0] / "v.db", first) == seq_of(directories[1] / "v.db", second) == 1
    with pytest.raises(NotFound):
        vaults[0].get(alice, second)
    with pytest.raises(NotFound):
        vaults[1].get(alice, first)
    for vault in vaults:
        vault.close()


def test_a_listings_batch_of_ids_decrypts_as_each_id_does():
    index = IndexKey(bytes(range(32)))
    ids = [index.row_id(seq) for seq in (5, 1, (1 << 43) - 1, 5)] + [bytes(16)]
    assert index.row_seqs(ids) == [index.row_seq(i) for i in ids] and index.row_seqs([]) == []
    for damaged in (b"", bytes(15), bytes(17), bytes(32)):  # would shift every later id's block
        with pytest.raises(IntegrityError):
            index.row_seqs([*ids[:2], damaged, *ids[2:]])
