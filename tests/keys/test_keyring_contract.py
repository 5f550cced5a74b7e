"""One contract, two keyrings: the core properties on the in-memory keyring and on the OS Secret Service.

The Secret Service runs only with ``-m real_keyring`` set up by ``scripts/run test`` (SCRATCHVAULT_REAL_KEYRING=1
makes its absence a failure). Every test uses fresh user ids and deletes the keyring entries it created.
"""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path

import pytest
from keyring.errors import PasswordDeleteError

from keys.testing import MemoryKeyring
from tests.support.keyring_entries import owner_username
from vault import IntegrityError, KeyUnavailable, NotFound, Principal, Vault, VaultError
from vault.storage import vault_id_at

TEXT = "line of a fetched page é€\n" * 4000  # > one 64 KiB chunk
BLOB = bytes(range(256)) * 300
DOC = {"files": [{"name": f"f{i}", "size": i} for i in range(500)], "ok": True, "none": None}


def services(db_path) -> tuple[str, str]:
    """The keyring services of the vault in ``db_path`` (named by its vault id)."""
    vault_id = vault_id_at(db_path)
    if vault_id is None:
        raise LookupError(f"no vault in {db_path}")
    prefix = f"scratchvault/{vault_id.hex()}"
    return prefix + "/index", prefix + "/owner-key"


def stored_bytes(location) -> bytes:
    """Everything the database holds for the vault at ``location``: the SQLite file and its -wal, or every row
    of every table in the vault's PostgreSQL schema as the superuser reads it (bytea as hex)."""
    if isinstance(location, Path):
        return b"".join(p.read_bytes() for p in location.parent.iterdir() if p.name.startswith(location.name))
    from tests.attacks import pg_locations

    _, admin, schema = pg_locations.resolve(location)
    with pg_locations.connected(admin, schema) as connection:
        tables = [name for (name,) in connection.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,))]
        assert "rows" in tables and "chunks" in tables
        return b"".join(str(row).encode() for table in tables
                        for row in connection.execute(f"SELECT t::text FROM {table} t"))


def forget_entries(backend, db_paths, users) -> None:
    """Delete every keyring entry these vaults may have created (absent ones are fine)."""
    for db_path in db_paths:
        if isinstance(db_path, Path) and not db_path.exists():
            continue
        try:
            index, owner = services(db_path)
        except (LookupError, VaultError):  # no vault was created in this file
            continue
        try:
            names = [owner_username(backend.get_password, index, u.user_id, v) for u in users for v in range(1, 6)]
        except KeyUnavailable:  # no index key: no owner entry can exist either
            names = []
        for service, user in [*((owner, name) for name in names), (index, "index")]:
            try:
                backend.delete_password(service, user)
            except PasswordDeleteError:
                pass


class VaultContract:
    """Properties every acceptable keyring backend must give the vault; subclasses supply ``backend``."""

    @pytest.fixture
    def backend(self):
        raise NotImplementedError

    @pytest.fixture
    def users(self):
        return Principal(f"alice-{uuid.uuid4().hex}"), Principal(f"bob-{uuid.uuid4().hex}")

    @pytest.fixture
    def open_vault(self, backend, users, db_path, clock):
        opened, paths = [], []

        def open_(path=db_path, **settings):
            paths.append(path)
            opened.append(Vault.open(path, keyring_backend=backend, clock=clock, **settings))
            return opened[-1]

        yield open_
        for vault in opened:
            vault.close()
        forget_entries(backend, set(paths), users)

    def test_round_trip_text_binary_json(self, open_vault, users):
        alice = users[0]
        vault = open_vault()
        ids = [vault.put(alice, "t", step, "tool", value).id for step, value in enumerate((TEXT, BLOB, DOC))]
        assert [vault.get(alice, row).content for row in ids] == [TEXT, BLOB, DOC]
        assert vault.read(alice, ids[0], mode="tail", n=10).content == TEXT[-10:]
        assert base64.b64decode(vault.read(alice, ids[1], mode="range", start=5, end=9).content) == BLOB[5:9]
        assert [r.id for r in vault.list_for_turn(alice, "t")] == ids

    def test_other_user_gets_the_same_not_found_as_a_missing_id(self, open_vault, users):
        alice, bob = users
        vault = open_vault()
        row = vault.put(alice, "t", 1, "tool", TEXT).id
        with pytest.raises(NotFound) as theirs:
            vault.read(bob, row)
        with pytest.raises(NotFound) as missing:
            vault.read(bob, "0" * 32)
        assert str(theirs.value) == str(missing.value)
        assert vault.list_for_turn(bob, "t") == []
        assert vault.get(alice, row).content == TEXT

    def test_expired_row_is_not_found_and_collected(self, open_vault, users, clock):
        alice = users[0]
        vault = open_vault()
        row = vault.put(alice, "t", 1, "tool", TEXT, ttl_seconds=60).id
        clock.advance(60)
        with pytest.raises(NotFound):
            vault.get(alice, row)
        assert vault.gc() == 1 and vault.stats()["rows"] == 0

    def test_flipped_chunk_byte_raises_integrity_error_and_keeps_the_row(self, open_vault, users, attacker):
        alice = users[0]
        vault = open_vault()
        row = vault.put(alice, "t", 1, "tool", TEXT).id
        vault.close()
        attacker.flip_at(attacker.seq_of(row), "chunk", 17, chunk=0)
        vault = open_vault()
        with pytest.raises(IntegrityError):
            vault.get(alice, row)
        with pytest.raises(IntegrityError):
            vault.read(alice, row, mode="head", n=10)
        assert vault.stats()["rows"] == 1

    def test_deleted_keyset_is_key_unavailable_and_no_new_key_is_made(self, open_vault, users, backend, db_path):
        alice = users[0]
        vault = open_vault()
        row = vault.put(alice, "t", 1, "tool", TEXT).id
        vault.close()
        index, owner = services(db_path)
        name = owner_username(backend.get_password, index, alice.user_id)
        saved = backend.get_password(owner, name)
        backend.delete_password(owner, name)
        vault = open_vault()
        for attempt in (lambda: vault.get(alice, row), lambda: vault.put(alice, "t", 2, "tool", "more")):
            with pytest.raises(KeyUnavailable, match="restore"):
                attempt()
        assert backend.get_password(owner, name) is None and vault.stats()["rows"] == 1
        backend.set_password(owner, name, saved)
        assert open_vault().get(alice, row).content == TEXT

    def test_reopened_vault_reads_back_every_kind(self, open_vault, users):
        alice = users[0]
        first = open_vault()
        ids = [first.put(alice, "t", step, "tool", value).id for step, value in enumerate((TEXT, BLOB, DOC))]
        first.close()
        again = open_vault()
        assert [again.get(alice, row).content for row in ids] == [TEXT, BLOB, DOC]

    def test_keys_live_in_the_backend_under_scratchvault_services_never_in_the_file(self, open_vault, users,
                                                                                    backend, db_path):
        alice = users[0]
        open_vault().put(alice, "t", 1, "tool", TEXT)
        index, owner = services(db_path)
        assert index.startswith("scratchvault/") and owner.startswith("scratchvault/")
        owner_key = json.loads(backend.get_password(owner, owner_username(backend.get_password, index, alice.user_id)))
        index_key = json.loads(backend.get_password(index, "index"))
        assert owner_key["format"] == index_key["format"] == "scratchvault-key/1"
        raw = [base64.b64decode(k) for k in (owner_key["key"], index_key["key"])]
        assert all(len(k) == 32 for k in raw)
        stored = stored_bytes(db_path)
        assert not any(k in stored or k.hex().encode() in stored for k in raw)

    def test_two_vaults_on_one_keyring_keep_their_keys_apart(self, open_vault, users, db_path, location_named):
        alice = users[0]
        other = location_named("second.db")
        first, second = open_vault(), open_vault(other)
        row = first.put(alice, "t", 1, "tool", "first vault").id
        second.put(alice, "t", 1, "tool", "second vault")
        assert services(db_path) != services(other)
        with pytest.raises(NotFound):
            second.get(alice, row)
        assert first.get(alice, row).content == "first vault"


class TestContractMemory(VaultContract):
    @pytest.fixture
    def backend(self):
        return MemoryKeyring()


@pytest.mark.real_keyring
class TestContractSecretService(VaultContract):
    @pytest.fixture
    def backend(self, real_keyring):
        return real_keyring


@pytest.mark.real_keyring
def test_auto_detection_picks_the_running_secret_service(real_keyring, db_path, clock):
    alice = Principal(f"alice-{uuid.uuid4().hex}")
    try:
        with Vault.open(db_path, clock=clock) as vault:  # keyring_backend=None: keyring's own choice
            row = vault.put(alice, "t", 1, "tool", TEXT).id
            assert "SecretService" in vault.stats()["keyring_backend"] or "chainer" in vault.stats()["keyring_backend"]
        index, owner = services(db_path)
        assert real_keyring.get_password(index, "index") is not None  # the keys went to the Secret Service
        assert real_keyring.get_password(owner, owner_username(real_keyring.get_password, index, alice.user_id))
        with Vault.open(db_path, keyring_backend=real_keyring, clock=clock) as vault:
            assert vault.get(alice, row).content == TEXT
    finally:
        forget_entries(real_keyring, [db_path], [alice])
