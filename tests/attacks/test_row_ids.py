"""Attacks on row ids that encrypt their row's seq (keys/blind_index.py, the store's find_row): ids unique and
reaching only their own row, never a newer row that reuses a deleted row's seq nor a row of another vault; an
attacker with write access to the file, ids crafted with the index key, seq reuse under threads, the lookup-mode
switch (a unique index on rows(id)) and files made before schema 3. threat_model.md, "Row ids"."""

from __future__ import annotations

import secrets
import threading

import pytest

from keys.blind_index import IndexKey
from keys.keyring.entries import parse_single_key
from keys.keyring.secret import Secret
from keys.testing import MemoryKeyring
from vault import IntegrityError, NotFound, Vault, VaultError
from vault.storage.sqlite.schema import MAX_SEQ


def index_key(ring) -> IndexKey:
    """The vault's index key, as the keyring holds it (the test plays someone who holds it)."""
    (secret,) = [value for (service, user), value in ring.secrets.items() if service.endswith("/index")]
    return IndexKey(parse_single_key(Secret(secret), "index key"))


def outcome(vault: Vault, call) -> str:
    before = vault.stats()["counters"]["integrity_failures"]
    try:
        call()
    except NotFound:
        return "notfound"
    except IntegrityError:
        assert vault.stats()["counters"]["integrity_failures"] == before + 1, "IntegrityError not counted"
        return "integrity"
    return "ok"


# -- what an id reaches ------------------------------------------------------------------------------------------
def test_ids_are_unique_and_do_not_follow_the_order_of_puts(vault, alice, attacker):
    ids = [vault.put(alice, "t", step, "x", "o").id for step in range(300)]
    assert len(set(ids)) == 300
    assert ids != sorted(ids) and ids != sorted(ids, reverse=True)
    prefixes = {i[:4] for i in ids}  # sequential seqs, yet the ids' first 16 bits spread out
    assert len(prefixes) > 250
    assert [attacker.seq_of(i) for i in ids] == list(range(1, 301))


def test_a_deleted_rows_id_does_not_reach_the_row_that_reuses_its_seq(vault, alice, bob, attacker):
    keep = vault.put(alice, "t", 1, "x", "kept").id
    for owner in (alice, bob):
        gone = vault.put(owner, "t", 2, "x", "deleted").id
        vault.delete(owner, gone)
        attacker.rewind_seq()  # PostgreSQL's sequence set back (SQLite takes the seq again by itself)
        newer = vault.put(alice, "t", 3, "x", "newer").id
        assert attacker.seq_of(newer) == 2  # the deleted row's seq, taken again
        for who in (alice, bob):
            with pytest.raises(NotFound):
                vault.get(who, gone)
            with pytest.raises(NotFound):
                vault.read(who, gone, mode="head", n=5)
        assert vault.get(alice, newer).content == "newer"
        vault.delete(alice, newer)
    assert vault.get(alice, keep).content == "kept"


def test_another_vaults_id_for_the_same_seq_is_not_found(tmp_path, alice, attacker_for):
    """Under this vault's key another vault's id names an unrelated seq (almost surely past the last possible
    one); an id that does name a live seq must still match it whole (crafted ones, below)."""
    directories = [tmp_path / name for name in ("a", "b")]
    vaults = []
    for directory in directories:
        directory.mkdir(mode=0o700)
        vaults.append(Vault.open(attacker_for(directory / "v.db").location, keyring_backend=MemoryKeyring()))
    first, second = (v.put(alice, "t", 1, "x", name).id for v, name in zip(vaults, "ab", strict=True))
    assert first != second
    files = [attacker_for(directory / "v.db") for directory in directories]
    assert files[0].seq_of(first) == files[1].seq_of(second) == 1
    with pytest.raises(NotFound):
        vaults[0].get(alice, second)
    with pytest.raises(NotFound):
        vaults[1].get(alice, first)
    for vault in vaults:
        vault.close()


# -- seq reuse and crafted ids ----------------------------------------------------------------------------------
def test_threads_putting_and_deleting_reuse_seqs_yet_no_old_id_reaches_a_newer_row(vault, alice, bob,
                                                                                   keyring_backend, attacker):
    live, gone, lock = {}, {}, threading.Lock()

    def work(number: int):
        owner = (alice, bob)[number % 2]
        for step in range(25):
            text = f"{number}-{step}"
            row = vault.put(owner, "t", step, "x", text).id
            if step % 2:
                vault.delete(owner, row)
            with lock:
                (gone if step % 2 else live)[row] = (owner, text)

    threads = [threading.Thread(target=work, args=(number,)) for number in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    top = vault.put(alice, "t", 99, "x", "top").id  # one certain reuse: delete the top row, put again
    vault.delete(alice, top)
    attacker.rewind_seq()  # PostgreSQL's sequence set back (SQLite takes the seq again by itself)
    gone[top] = (alice, "top")
    live[vault.put(alice, "t", 100, "x", "after").id] = (alice, "after")
    index = index_key(keyring_backend)
    seqs = [index.row_seq(bytes.fromhex(i)) for i in [*live, *gone]]
    assert len(set(live) | set(gone)) == len(live) + len(gone) == 102  # ids unique over time
    assert len(set(seqs)) < len(seqs)  # seqs were reused
    for row, (owner, text) in live.items():
        assert vault.get(owner, row).content == text
    for row in gone:
        for who in (alice, bob):
            with pytest.raises(NotFound):
                vault.get(who, row)


def test_an_id_crafted_for_a_live_seq_with_other_random_bits_is_not_found(vault, alice, bob, keyring_backend,
                                                                          attacker):
    row = vault.put(alice, "t", 1, "x", "secret").id
    index = index_key(keyring_backend)
    seq = attacker.seq_of(row)
    assert index.row_seq(bytes.fromhex(row)) == seq
    for crafted in (index.row_id(seq).hex() for _ in range(20)):
        for who in (alice, bob):
            assert outcome(vault, lambda w=who, c=crafted: vault.get(w, c)) == "notfound"
            assert outcome(vault, lambda w=who, c=crafted: vault.delete(w, c)) == "notfound"
    for seq in (0, MAX_SEQ, MAX_SEQ + 1, 2**64 - 1):  # ids naming seqs no row can have
        assert outcome(vault, lambda s=seq: vault.get(alice, index._row_ids.encrypt(s.to_bytes(8, "big") + bytes(8))
                                                      .hex())) == "notfound"
    assert vault.get(alice, row).content == "secret"


def test_a_stale_id_whose_seq_now_holds_another_owners_damaged_row_is_not_found(vault, alice, bob, attacker):
    stale = vault.put(bob, "t", 1, "x", "bob's").id
    vault.delete(bob, stale)
    attacker.rewind_seq()
    reused = vault.put(alice, "t", 1, "x", "alice's").id
    assert attacker.seq_of(reused) == 1
    attacker.write(1, "key_version", 0)
    assert outcome(vault, lambda: vault.get(bob, stale)) == "notfound"


# -- tampering with the id column and with seqs ------------------------------------------------------------------
@pytest.mark.parametrize("stored", ["text", "integer", "short", "long", "other_row"])
def test_id_column_of_the_wrong_type_or_length_never_yields_content_nor_deletes(vault, alice, bob, attacker, stored):
    row = vault.put(alice, "t", 1, "x", "target").id
    other = vault.put(alice, "t", 2, "x", "other").id
    raw, other_seq = bytes.fromhex(row), attacker.seq_of(other)
    value = {"text": row, "integer": int.from_bytes(raw[:7], "big"), "short": raw[:15], "long": raw + b"\0",
             "other_row": bytes.fromhex(other)}[stored]
    attacker.write(attacker.seq_of(row), "id", value)
    before = attacker.counts()
    for who in (alice, bob):
        for call in (lambda w=who: vault.get(w, row), lambda w=who: vault.read(w, row, mode="full"),
                     lambda w=who: vault.delete(w, row)):
            assert outcome(vault, call) in {"notfound", "integrity"}
    assert attacker.counts() == before
    if attacker.read(other_seq, "id") == bytes.fromhex(other):  # one cell changed (PostgreSQL alters the column)
        assert vault.get(alice, other).content == "other"
    else:
        assert outcome(vault, lambda: vault.get(alice, other)) in {"notfound", "integrity"}


def test_a_row_duplicated_at_another_seq_reads_as_itself_and_delete_takes_only_its_own_seq(vault, alice, attacker):
    row = vault.put(alice, "t", 1, "x", "once").id
    attacker.copy_row(attacker.seq_of(row), 500)  # no UNIQUE on rows.id in a schema 3 file
    assert vault.get(alice, row).content == "once"
    vault.delete(alice, row)
    assert attacker.counts() == (1, 1, 1)  # the copy at seq 500 is left; it is unreachable
    assert outcome(vault, lambda: vault.get(alice, row)) == "notfound"


def test_a_row_moved_to_another_seq_fails_the_listing_and_reads_as_not_found(vault, alice, attacker):
    """Listed, it could not be read: the listing reports the damage (counted) instead of showing it."""
    row = vault.put(alice, "t", 1, "x", "moved").id
    seq = attacker.seq_of(row)
    attacker.copy_row(seq, seq + 7)
    attacker.remove(seq, "row")  # its summary and chunks stay where they were
    assert outcome(vault, lambda: vault.list_for_turn(alice, "t")) == "integrity"
    assert outcome(vault, lambda: vault.get(alice, row)) == "notfound"


def test_puts_fill_the_last_seq_then_stop_cleanly_deleting_nothing(vault, alice, attacker):
    first = vault.put(alice, "t", 1, "x", "first").id
    attacker.forge_top_seq(attacker.seq_of(first), attacker.LAST_SEQ - 1)
    last = vault.put(alice, "t", 2, "x", "x" * 70_000).id  # two chunks at the last seq (SQLite: 2^43 - 1)
    assert attacker.seq_of(last) == attacker.LAST_SEQ
    assert vault.read(alice, last, mode="range", start=69_990, end=70_000).content == "x" * 10
    before = attacker.counts()
    with pytest.raises(VaultError):
        vault.put(alice, "t", 3, "x", "one too many")
    assert attacker.counts() == before
    assert vault.get(alice, first).content == "first"


def test_a_put_stopped_by_a_forged_seq_is_counted(vault, alice, attacker):
    row = vault.put(alice, "t", 1, "x", "o").id
    attacker.forge_top_seq(attacker.seq_of(row), attacker.LAST_SEQ)
    assert outcome(vault, lambda: vault.put(alice, "t", 2, "x", "no room")) == "integrity"


# -- the lookup mode: a unique index on rows(id) --------------------------------------------------------------------
@pytest.mark.sqlite_only("the lookup by a unique index on rows(id) is the SQLite store's (files made before schema 3)")
def test_an_inconsistent_index_added_to_a_new_file_never_serves_one_row_under_anothers_id(db_path, keyring_backend,
                                                                                          alice, attacker):
    with Vault.open(db_path, keyring_backend=keyring_backend) as vault:
        a, b = (vault.put(alice, "t", step, "x", text).id for step, text in ((1, "AAA"), (2, "BBB")))
    ia, ib = bytes.fromhex(a), bytes.fromhex(b)
    swap = "UPDATE rows SET id = CASE seq WHEN 1 THEN ? ELSE ? END WHERE seq IN (1, 2)"
    schema = "UPDATE sqlite_master SET sql = ? WHERE name = 'evil'"
    # an index built over swapped ids, hidden (declared on turn_tag) while the ids are put back, then declared on id
    attacker.run((swap, ib, ia), "CREATE UNIQUE INDEX evil ON rows (id)", "PRAGMA writable_schema = ON",
                 (schema, "CREATE INDEX evil ON rows (turn_tag)"))
    attacker.run((swap, ia, ib), "PRAGMA writable_schema = ON", (schema, "CREATE UNIQUE INDEX evil ON rows (id)"))
    before = attacker.counts()
    with pytest.raises(IntegrityError, match="did not make"):  # an index the vault did not make: the file is refused
        Vault.open(db_path, keyring_backend=keyring_backend)
    assert attacker.counts() == before


@pytest.mark.sqlite_only("the lookup by a unique index on rows(id) is the SQLite store's (files made before schema 3)")
def test_a_unique_index_added_to_a_new_file_to_make_moved_rows_readable_is_refused(db_path, keyring_backend, alice,
                                                                                  attacker):
    with Vault.open(db_path, keyring_backend=keyring_backend) as vault:
        row = vault.put(alice, "t", 1, "x", "moved").id
    attacker.move_row(attacker.seq_of(row), 900)
    with Vault.open(db_path, keyring_backend=keyring_backend) as vault:
        assert outcome(vault, lambda: vault.get(alice, row)) == "notfound"
    attacker.run("CREATE UNIQUE INDEX flip ON rows (id)")  # it would make the moved row readable where it now is:
    with pytest.raises(IntegrityError, match="did not make"):  # an index the vault did not make refuses the file
        Vault.open(db_path, keyring_backend=keyring_backend)


# -- files made before schema 3 ------------------------------------------------------------------------------------
@pytest.mark.sqlite_only("the lookup by a unique index on rows(id) is the SQLite store's (files made before schema 3)")
def test_a_legacy_file_mixing_random_and_new_form_ids(db_path, keyring_backend, alice, bob, monkeypatch, attacker):
    attacker.prepare("legacy")
    with Vault.open(db_path, keyring_backend=keyring_backend) as vault:
        with monkeypatch.context() as patch:  # as scratchvault 2 wrote them: 128 random bits
            patch.setattr(IndexKey, "row_id", lambda self, seq: secrets.token_bytes(16))
            old = vault.put(alice, "t", 1, "x", "old form").id
        new = vault.put(alice, "t", 2, "x", "new form").id
        top = vault.put(bob, "t", 1, "x", "bob's top").id
        vault.delete(bob, top)
        reuse = vault.put(alice, "t", 3, "x", "reuses bob's seq").id
        assert attacker.seq_of(reuse) == 3 and index_key(keyring_backend).row_seq(bytes.fromhex(reuse)) == 3
        for who in (alice, bob):
            assert outcome(vault, lambda w=who: vault.get(w, top)) == "notfound"
    attacker.shift_rows(1000)
    with Vault.open(db_path, keyring_backend=keyring_backend) as vault:  # found by id, wherever they are
        assert [vault.get(alice, i).content for i in (old, new, reuse)] == ["old form", "new form", "reuses bob's seq"]
        assert outcome(vault, lambda: vault.get(bob, old)) == "notfound"
        assert vault.put(alice, "t", 4, "x", "after").id not in (old, new, reuse)
    # a writer rebuilds rows without its UNIQUE constraint: a table the vault did not make, so the file is refused
    attacker.run("CREATE TABLE r2 AS SELECT * FROM rows", "DROP TABLE rows", "ALTER TABLE r2 RENAME TO rows")
    before = attacker.counts()
    with pytest.raises(IntegrityError, match="did not make"):
        Vault.open(db_path, keyring_backend=keyring_backend)
    assert attacker.counts() == before


@pytest.mark.sqlite_only("the lookup by a unique index on rows(id) is the SQLite store's (files made before schema 3)")
def test_a_flipped_id_byte_in_a_file_made_before_schema_3_is_detected_not_served(db_path, keyring_backend, alice,
                                                                                 attacker):
    """The id-index lookup, which every upgraded file uses: an altered id is NotFound, and the row it now names
    is an IntegrityError, counted, on every path (get, listing, delete), which deletes nothing (the tampering
    suite's flipped id in such a file checks the get alone)."""
    attacker.prepare("legacy")
    with Vault.open(db_path, keyring_backend=keyring_backend) as vault:
        row = vault.put(alice, "t", 1, "x", "target").id
    flipped = bytearray(bytes.fromhex(row))
    flipped[0] ^= 1
    attacker.write(attacker.seq_of(row), "id", bytes(flipped))
    before = attacker.counts()
    with Vault.open(db_path, keyring_backend=keyring_backend) as vault:
        with pytest.raises(NotFound):
            vault.get(alice, row)
        with pytest.raises(IntegrityError):  # found through the index; the id is in every AAD
            vault.get(alice, bytes(flipped).hex())
        with pytest.raises(IntegrityError):
            vault.list_for_turn(alice, "t")
        with pytest.raises(IntegrityError):
            vault.delete(alice, bytes(flipped).hex())
        assert vault.stats()["counters"]["integrity_failures"] == 3
    assert attacker.counts() == before
