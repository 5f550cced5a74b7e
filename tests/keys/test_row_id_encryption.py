"""Row ids: one AES-256 block of (seq, 64 random bits) under a key derived from the index key (threat_model.md,
"Row ids"): the block permutation, the key's derivation, and frozen ids that keep naming their seqs. What an id
reaches in a vault, and attacks on them, are tests/attacks/test_row_ids.py."""

from __future__ import annotations

import os
import pickle
import threading

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

from keys.blind_index import IndexKey
from keys.crypto import kdf
from keys.crypto.aead import BlockPermutation
from keys.errors import IntegrityError
from vault.storage.sqlite.schema import MAX_SEQ


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


def test_a_listings_batch_of_ids_decrypts_as_each_id_does():
    index = IndexKey(bytes(range(32)))
    ids = [index.row_id(seq) for seq in (5, 1, (1 << 43) - 1, 5)] + [bytes(16)]
    assert index.row_seqs(ids) == [index.row_seq(i) for i in ids] and index.row_seqs([]) == []
    for damaged in (b"", bytes(15), bytes(17), bytes(32)):  # would shift every later id's block
        with pytest.raises(IntegrityError):
            index.row_seqs([*ids[:2], damaged, *ids[2:]])


def test_block_permutation_agrees_with_a_fresh_cipher_under_eight_threads():
    key = os.urandom(32)
    shared, errors = BlockPermutation(key), []

    def work():
        for _ in range(500):
            block = os.urandom(16)
            fresh = Cipher(algorithms.AES(key), modes.ECB())
            expected = fresh.encryptor().update(block)
            if shared.encrypt(block) != expected or shared.decrypt(expected) != block:
                errors.append(block)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def test_row_id_key_is_hkdf_expand_of_the_index_key_and_apart_from_its_other_outputs():
    raw = bytes(range(32))
    index = IndexKey(raw)
    row_key = HKDFExpand(hashes.SHA256(), 32, b"scratchvault/row-id-key/v1").derive(raw)
    assert BlockPermutation(row_key).encrypt(bytes(16)) == index._row_ids.encrypt(bytes(16))
    others = {kdf.mac(raw, b"scratchvault/audit-key/v1\x01"), kdf.mac(raw, b"scratchvault/owner-name-key/v1\x01"),
              index.owner_tag(""), index.owner_tag("scratchvault/row-id-key/v1\x01"), index.turn_tag(b"", ""),
              index.commitment(b"")}
    assert row_key not in others


def test_frozen_row_ids_keep_naming_their_seqs():
    """Every id in every schema 3 file depends on this derivation and layout; a change makes them all NotFound
    (a silent miss, not an IntegrityError). Frozen: index key 00..1f, plaintext seq (8 bytes BE) | 8 bytes."""
    index = IndexKey(bytes(range(32)))
    frozen = {"13bcf8f2e5db2d9a09e1e3bacb76f9b2": 7, "062afb8c5f4160384e1dfea160b107b2": MAX_SEQ - 1}
    for row_id, seq in frozen.items():
        assert index.row_seq(bytes.fromhex(row_id)) == seq
    assert index._row_ids.decrypt(bytes.fromhex("13bcf8f2e5db2d9a09e1e3bacb76f9b2"))[8:] == b"\xa5" * 8
