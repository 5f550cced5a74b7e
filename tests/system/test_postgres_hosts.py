"""Two hosts over one PostgreSQL database and one Secret Service: two processes, each with its own working directory
and HOME, reaching the GNOME Keyring daemon the test command started over the session bus (tests/system/pg_hosts.py).

A turn written on A is resumed on B; a rotation on A is seen on B at once for a row under the new version and on
B's next cache miss for its own puts; a shred on A leaves B nothing (NotFound, and no key of the owner left in the
Secret Service, so not even a copy of the rows would open); two hosts racing to make a new owner's first key end
with one keyset that both use.
"""

from __future__ import annotations

import random
import time
import uuid

import pytest

from tests.system.pg_hosts import Host, HostError, admin

pytestmark = [pytest.mark.postgres, pytest.mark.real_keyring]
CHUNK = 64 * 1024


@pytest.fixture
def url(pg_schemas) -> str:
    return pg_schemas("hosts")


@pytest.fixture
def hosts(url, real_keyring, tmp_path):
    """Hosts A and B, each with a vault "main" open (default key cache: 300 s)."""
    a, b = Host("a", url, tmp_path), Host("b", url, tmp_path)
    try:
        a("open")  # A makes the vault (its id and index key); B opens the existing one
        b("open")
        yield a, b
    finally:
        a.finish()
        b.finish()
        a.close()
        b.close()
    for host in (a, b):
        assert not any(host.workdir.iterdir()), f"host {host.name} wrote into its working directory"


def user() -> str:
    return f"host-user-{uuid.uuid4().hex[:12]}"


def text(size: int, seed: int) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz .,") for _ in range(size))


def owner_tag_of(url: str, row: str) -> bytes:
    """The owner tag stored with row ``row`` (what a reader of the database sees instead of the user id)."""
    with admin(url) as connection:
        found = connection.execute("SELECT owner_tag FROM rows WHERE id = %s", (bytes.fromhex(row),)).fetchone()
    return bytes(found[0])


def keyring_entries(url: str, real_keyring, owner_tag: bytes) -> dict[int, str | None]:
    """The owner's Secret Service entries, by every version the database ever reserved, recorded or destroyed."""
    with admin(url) as connection:
        vault_id = bytes(connection.execute("SELECT value FROM meta WHERE name = 'vault_id'").fetchone()[0])
        versions = {v for (v,) in connection.execute(
            "SELECT version FROM key_reservations WHERE owner_tag = %(t)s UNION SELECT version FROM owner_keys "
            "WHERE owner_tag = %(t)s UNION SELECT version FROM key_tombstones WHERE owner_tag = %(t)s",
            {"t": owner_tag})}
    service = f"scratchvault/{vault_id.hex()}/owner-key"
    return {v: real_keyring.get_password(service, f"{owner_tag.hex()}.{v}") for v in sorted(versions)}


def test_a_turn_written_on_a_is_resumed_listed_extended_and_read_on_b(hosts):
    a, b = hosts
    who, turn = user(), "turn-resumed"
    contents = {1: text(3 * CHUNK + 500, 1), 2: {"files": [{"name": f"f{n}", "size": n} for n in range(50)]},
                3: "a short note"}
    ids = {step: a("put", user=who, turn=turn, step=step, content=content, ttl=600)
           for step, content in contents.items()}
    listed_on_a = a("list", user=who, turn=turn)
    assert b("has_rows", user=who, turn=turn) is True
    assert b("list", user=who, turn=turn) == listed_on_a
    assert [row[0] for row in listed_on_a] == [ids[1], ids[2], ids[3]]
    big = contents[1]
    assert b("read", user=who, id=ids[1], mode="head", n=100) == big[:100]
    assert b("read", user=who, id=ids[1], mode="range", start=CHUNK - 50, end=CHUNK + 50) == big[CHUNK - 50:CHUNK + 50]
    assert b("read", user=who, id=ids[1], mode="tail", n=70) == big[-70:]
    before = time.time()
    assert b("extend", user=who, turn=turn, ttl=7200) == 3
    for step, row in ids.items():
        record = a("get", user=who, id=row)  # the extension made on B is what A reads
        assert record["expires_at"] >= before + 7200
        assert record["content"] == contents[step]
        assert b("get", user=who, id=row)["content"] == contents[step]
    ids[4] = b("put", user=who, turn=turn, step=4, content="written on B", ttl=600)  # the turn goes on, on B
    assert [row[0] for row in a("list", user=who, turn=turn)] == [ids[1], ids[2], ids[3], ids[4]]
    assert a("read", user=who, id=ids[4], mode="head") == "written on B"
    stranger = user()
    assert b("list", user=stranger, turn=turn) == []
    with pytest.raises(HostError, match=r"^NotFound$"):
        b("get", user=stranger, id=ids[1])


def test_a_rotation_on_a_is_seen_by_b_at_once_for_a_new_version_and_on_its_next_cache_miss(hosts, url,
                                                                                            real_keyring):
    a, b = hosts
    b("open", vault="short", key_cache_seconds=1)
    who, turn = user(), "turn-rotated"
    old = a("put", user=who, turn=turn, step=1, content="under version 1")
    assert b("get", user=who, id=old)["key_version"] == 1  # B's caches (300 s and 1 s) now hold version 1
    assert b("get", vault="short", user=who, id=old)["key_version"] == 1
    assert a("rotate", user=who) == 2
    new = a("put", user=who, turn=turn, step=2, content="under version 2")
    assert a("get", user=who, id=new)["key_version"] == 2
    # a row under a version B's cached keyset lacks: B reloads at once (its cache has 300 s to run)
    assert b("get", user=who, id=new)["content"] == "under version 2"
    time.sleep(1.2)  # the short cache's lifetime is over: its next put loads the keyset and uses the new primary
    on_miss = b("put", vault="short", user=who, turn=turn, step=3, content="B after its cache miss")
    assert a("get", user=who, id=on_miss)["key_version"] == 2
    assert a("rewrap", user=who) >= 1
    assert a("retire", user=who) == 1
    assert keyring_entries(url, real_keyring, owner_tag_of(url, old))[1] is None  # version 1 left the Secret Service
    # B's long cache still has version 1 as primary: its put sees the retirement and wraps under version 2
    after = b("put", user=who, turn=turn, step=4, content="B after the retirement")
    assert b("get", user=who, id=after)["key_version"] == 2
    rows = a("list", user=who, turn=turn)
    assert {row[0] for row in rows} >= {old, new, on_miss, after}
    for row in rows:
        assert b("get", user=who, id=row[0])["key_version"] == 2
        assert a("get", user=who, id=row[0])["content"] == b("get", user=who, id=row[0])["content"]


def test_a_shred_on_a_makes_b_refuse_and_leaves_no_key_of_the_owner(hosts, url, real_keyring):
    a, b = hosts
    b("open", vault="short", key_cache_seconds=1)
    who, turn = user(), "turn-shredded"
    ids = [a("put", user=who, turn=turn, step=step, content=f"to be shredded {step}") for step in range(3)]
    a("rotate", user=who)
    ids.append(a("put", user=who, turn=turn, step=3, content="under version 2"))
    for row in ids:  # B holds the owner's keyset (both versions) in its caches
        assert b("get", user=who, id=row)["content"] == b("get", vault="short", user=who, id=row)["content"]
    owner_tag = owner_tag_of(url, ids[0])
    entries = keyring_entries(url, real_keyring, owner_tag)
    assert sorted(v for v, key in entries.items() if key is not None) == [1, 2]
    with admin(url) as connection:  # what a copy of the database (a backup, a replica) keeps of the owner
        for table in ("rows", "summaries", "chunks"):
            connection.execute(f"CREATE TABLE copied_{table} AS SELECT * FROM {table}")
    assert a("shred", user=who) == 4
    for row in ids:
        with pytest.raises(HostError, match=r"^NotFound$"):
            b("get", user=who, id=row)
        with pytest.raises(HostError, match=r"^NotFound$"):
            b("read", user=who, id=row, mode="head")
    assert b("list", user=who, turn=turn) == []
    assert b("has_rows", user=who, turn=turn) is False
    assert b("extend", user=who, turn=turn, ttl=600) == 0
    assert all(key is None for key in keyring_entries(url, real_keyring, owner_tag).values())
    time.sleep(1.2)  # B's short cache has expired: from now on it asks the Secret Service
    again = b("put", vault="short", user=who, turn="turn-after", step=1, content="a new life")
    assert a("get", user=who, id=again)["content"] == "a new life"  # the owner starts afresh, with a new key
    fresh = keyring_entries(url, real_keyring, owner_tag)
    assert [v for v, key in fresh.items() if key is not None] == [a("get", user=who, id=again)["key_version"]]
    assert not set(fresh.values()) & {key for key in entries.values() if key is not None}
    with admin(url) as connection:  # the copy put back: no key is left that opens its wrapped keys
        for table in ("rows", "summaries", "chunks"):
            connection.execute(f"INSERT INTO {table} SELECT * FROM copied_{table} ON CONFLICT DO NOTHING")
    for row in ids:  # (B's 300 s cache still holds the shredded keys: threat_model.md, "Key cache exposure window")
        with pytest.raises(HostError, match=r"^(NotFound|KeyUnavailable|IntegrityError)$"):
            b("get", vault="short", user=who, id=row)
        with pytest.raises(HostError, match=r"^(NotFound|KeyUnavailable|IntegrityError)$"):
            a("get", user=who, id=row)


def test_two_hosts_racing_to_make_a_new_owners_first_key_end_with_one_keyset(hosts, url, real_keyring):
    a, b = hosts
    raced = 0
    for race in range(4):
        who = user()
        start = time.time() + 0.2
        a.send("put", user=who, turn="race", step=1, content=f"from A, race {race}", at=start)
        b.send("put", user=who, turn="race", step=2, content=f"from B, race {race}", at=start)
        from_a, from_b = a.reply(), b.reply()
        for host in (a, b):
            assert host("get", user=who, id=from_a)["content"] == f"from A, race {race}"
            assert host("get", user=who, id=from_b)["content"] == f"from B, race {race}"
        assert a("get", user=who, id=from_a)["key_version"] == b("get", user=who, id=from_b)["key_version"]
        owner_tag = owner_tag_of(url, from_a)
        with admin(url) as connection:
            live = connection.execute("SELECT version FROM owner_keys WHERE owner_tag = %(t)s AND version NOT IN "
                                      "(SELECT version FROM key_tombstones WHERE owner_tag = %(t)s)",
                                      {"t": owner_tag}).fetchall()
        assert len(live) == 1, f"race {race}: {len(live)} live key versions"
        entries = keyring_entries(url, real_keyring, owner_tag)
        present = [v for v, key in entries.items() if key is not None]
        assert present == [live[0][0]], f"race {race}: keyring entries {present}, live {live}"
        raced += len(entries) == 2  # both hosts reserved a version: both were making the first key
    assert raced, "the hosts never raced (one always found the other's key): the test proved nothing"
