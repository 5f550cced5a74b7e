"""The audit trail (logger ``scratchvault.audit``): one JSON record per operation with the outcome the caller
saw, identifiers only as keyed tags, never content or summaries, and never an operation broken by it."""

from __future__ import annotations

import hashlib
import json
import logging
from datetime import datetime

import pytest

from tests.attacks.stores import store_module
from tests.support.fault_counts import FaultDouble
from vault import IntegrityError, InvalidArgument, KeyUnavailable, NotFound, Principal, Vault
from vault.audit import AuditTrail

CONTENT = "CANARY-CONTENT-zx " * 500
USER, TURN, EXEC = "CANARY-USER-carol", "CANARY-TURN-7", "CANARY-EXEC-shell"
CAROL = Principal(USER, actor="CANARY-ACTOR-planner", channel="CANARY-CHANNEL-web")
CANARIES = ("CANARY", "zx ", "carol", "planner")


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())

    def records(self) -> list[dict]:
        return [json.loads(message) for message in self.messages]


@pytest.fixture
def audit():
    logger = logging.getLogger("scratchvault.audit")
    handler = Collect()
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(logging.NOTSET)


def outcomes(audit: Collect) -> list[tuple[str, str]]:
    return [(record["op"], record["outcome"]) for record in audit.records()]


def test_every_operation_emits_one_record_with_ok_and_its_counts(vault, audit, clock):
    row = vault.put(CAROL, TURN, 1, EXEC, CONTENT, ttl_seconds=60).id
    vault.get(CAROL, row)
    vault.read(CAROL, row, mode="tail", n=5)
    vault.list_for_turn(CAROL, TURN)
    vault.extend_turn(CAROL, TURN, 600)
    vault.delete(CAROL, row)
    vault.put(CAROL, TURN, 2, EXEC, b"\x00" * 10, ttl_seconds=1)
    clock.advance(2)
    vault.gc()
    vault.rotate_owner_key(USER)
    vault.rewrap(USER)
    vault.retire_old_key_versions(USER)
    vault.shred_owner(USER)
    records = audit.records()
    assert outcomes(audit) == [(op, "ok") for op in ("put", "get", "read", "list", "extend_turn", "delete", "put",
                                                     "gc", "rotate", "rewrap", "retire", "shred")]
    put, get, read, listed, extended, deleted, _, gc, rotate, rewrap, retire, shred = records
    assert (put["row"], put["kind"], put["bytes"]) == (row, "text", len(CONTENT))
    assert get["row"] == read["row"] == deleted["row"] == row and (read["mode"], read["returned"]) == ("tail", 5)
    assert (listed["rows"], extended["rows"], gc["rows"], rewrap["rows"], shred["rows"]) == (1, 1, 1, 0, 0)
    assert (rotate["key_version"], retire["versions"]) == (2, 1)
    assert "user" not in gc and all(r["vault"] == records[0]["vault"] for r in records)


def test_refused_reads_are_not_found_and_only_another_owners_row_is_marked_denied(vault, audit, bob, clock):
    row = vault.put(CAROL, TURN, 1, EXEC, CONTENT, ttl_seconds=10).id
    attempts = [lambda: vault.read(bob, row), lambda: vault.get(bob, row), lambda: vault.delete(bob, row),
                lambda: vault.read(CAROL, row, turn_id="other-turn"), lambda: vault.read(CAROL, "0" * 32),
                lambda: vault.read(CAROL, "not an id, maybe " + USER)]
    for attempt in attempts:
        with pytest.raises(NotFound):
            attempt()
    clock.advance(10)
    with pytest.raises(NotFound):
        vault.read(CAROL, row)
    refused = audit.records()[1:]
    assert [(r["op"], r["outcome"], r["denied"]) for r in refused] == [
        ("read", "not_found", True), ("get", "not_found", True), ("delete", "not_found", True),
        ("read", "not_found", True), ("read", "not_found", False), ("read", "not_found", False),
        ("read", "not_found", False)]
    assert "row" not in refused[5]  # an id the caller made up is never written to the log
    assert refused[0]["user"] != refused[3]["user"] == audit.records()[0]["user"]


def test_integrity_key_unavailable_and_invalid_outcomes(vault, audit, attacker, keyring_backend):
    row = vault.put(CAROL, TURN, 1, EXEC, CONTENT).id
    attacker.flip_at(attacker.seq_of(row), "chunk", 20, chunk=0, bit=4)
    with pytest.raises(IntegrityError):
        vault.read(CAROL, row)
    with pytest.raises(InvalidArgument):
        vault.read(CAROL, row, mode="everything")
    with pytest.raises(InvalidArgument):
        vault.put(CAROL, TURN, -1, EXEC, "x")
    owner_entries = [name for name in keyring_backend.secrets if name[0].endswith("/owner-key")]
    for name in owner_entries:
        del keyring_backend.secrets[name]
    vault._keys.forget(USER)
    with pytest.raises(KeyUnavailable):
        vault.get(CAROL, row)
    assert outcomes(audit)[1:] == [("read", "integrity"), ("read", "invalid"), ("put", "invalid"),
                                   ("get", "key_unavailable")]
    assert audit.records()[-1]["user"] == audit.records()[0]["user"]  # tagged with the cached index key


def test_records_hold_no_content_summaries_or_identifiers(vault, audit, bob):
    json_row = vault.put(CAROL, TURN, 1, EXEC, {"CANARY-KEY": ["CANARY-VALUE"] * 50}).id
    text_row = vault.put(CAROL, TURN, 2, EXEC, CONTENT).id
    summaries = [rep.summary for rep in vault.list_for_turn(CAROL, TURN)]
    assert any("CANARY" in summary for summary in summaries)  # the summaries do hold canaries
    vault.read(CAROL, text_row, mode="full")
    vault.get(CAROL, json_row)
    with pytest.raises(NotFound):
        vault.read(bob, text_row)
    vault.extend_turn(CAROL, TURN, 100)
    vault.rotate_owner_key(USER)
    vault.rewrap()
    with pytest.raises(InvalidArgument):
        vault.read(CAROL, text_row, mode=USER)
    vault.shred_owner(USER)
    text = "\n".join(audit.messages)
    assert len(audit.messages) == 11
    assert not any(canary in text for canary in CANARIES)
    assert not any(summary[:20] in text for summary in summaries)


def test_tags_are_stable_keyed_per_vault_and_match_audit_tags(vault, audit, vault_dir, keyring_backend, clock):
    vault.put(CAROL, TURN, 1, EXEC, "x")
    vault.put(CAROL, "turn-2", 2, EXEC, "y")
    first, second = audit.records()
    assert first["user"] == second["user"] and first["turn"] != second["turn"]
    assert vault.audit_tags(user_id=USER, actor=CAROL.actor, channel=CAROL.channel, turn_id=TURN) == {
        kind: first[kind] for kind in ("user", "actor", "channel", "turn")}
    assert len(first["user"]) == 32 and first["user"] not in (hashlib.sha256(USER.encode()).hexdigest()[:32],
                                                              vault._keys.index_key().owner_tag(USER).hex()[:32])
    assert vault.audit_tags(user_id="x", actor="x")["user"] != vault.audit_tags(actor="x")["actor"]
    with Vault.open(vault_dir / "other.db", keyring_backend=keyring_backend, clock=clock) as other:
        assert other.audit_tags(user_id=USER)["user"] != first["user"]
    with pytest.raises(InvalidArgument):
        vault.audit_tags(user_id="")


def test_record_time_is_utc_and_fields_are_plain_json(vault, audit):
    vault.put(CAROL, TURN, 1, EXEC, "x")
    record = audit.records()[0]
    assert record["time"].endswith("Z") and datetime.fromisoformat(record["time"].replace("Z", "+00:00"))
    assert all(isinstance(value, str | int | bool) for value in record.values())


def test_a_failing_handler_or_filter_never_breaks_an_operation(vault, audit):
    class Broken(logging.Handler, FaultDouble):
        def emit(self, record: logging.LogRecord) -> None:
            self.failed()
            raise OSError("disk full")

    logger = logging.getLogger("scratchvault.audit")
    broken = Broken()
    broken.arm()
    logger.addHandler(broken)
    try:
        row = vault.put(CAROL, TURN, 1, EXEC, "still stored").id
        logger.addFilter(lambda record: 1 / 0)
        assert vault.get(CAROL, row).content == "still stored"
    finally:
        logger.removeHandler(broken)
        logger.filters.clear()
    assert outcomes(audit) == [("put", "ok")]  # the working handler got its record; the filter stopped the next


def test_unbuildable_tags_leave_a_minimal_record_and_the_operation_works(vault, audit, monkeypatch):
    monkeypatch.setattr(type(vault._keys.index_key()), "audit_tag", lambda *args: 1 / 0)
    assert vault.put(CAROL, TURN, 1, EXEC, "x").id
    assert [(r["op"], r["outcome"], r.get("audit_error")) for r in audit.records()] == [("put", "ok", True)]


def test_no_record_is_built_unless_the_logger_is_enabled_for_info(vault, monkeypatch):
    built: list[tuple] = []
    monkeypatch.setattr(AuditTrail, "record", lambda *args, **kwargs: built.append(args))
    assert logging.getLogger("scratchvault.audit").getEffectiveLevel() > logging.INFO
    row = vault.put(CAROL, TURN, 1, EXEC, "x").id
    assert vault.read(CAROL, row).content == "x" and built == []


def test_gc_rewrap_and_shred_report_running_totals_after_each_batch(vault, clock, monkeypatch):
    monkeypatch.setattr(store_module(), "GC_BATCH", 3)
    for step in range(7):
        vault.put(CAROL, TURN, step, EXEC, "x", ttl_seconds=1 if step % 2 else 100)
    clock.advance(2)
    seen: dict[str, list[int]] = {"gc": [], "rewrap": [], "shred": []}
    assert vault.gc(progress=seen["gc"].append) == 3
    vault.rotate_owner_key(USER)
    assert vault.rewrap(USER, batch=3, progress=seen["rewrap"].append) == 4
    assert vault.shred_owner(USER, progress=seen["shred"].append) == 4
    assert seen == {"gc": [3, 3], "rewrap": [3, 4], "shred": [3, 4]}


def test_stats_count_rows_and_bytes_per_key_version(vault, clock):
    vault.put(CAROL, TURN, 1, EXEC, "abc", ttl_seconds=1)
    vault.rotate_owner_key(USER)
    vault.put(CAROL, TURN, 2, EXEC, "defgh")
    clock.advance(2)
    stats = vault.stats()
    assert (stats["rows"], stats["bytes"], stats["expired_rows"]) == (2, 8, 1)
    assert stats["by_key_version"] == {1: {"rows": 1, "bytes": 3}, 2: {"rows": 1, "bytes": 5}}
    assert set(stats["counters"]) >= {"reads", "denied", "integrity_failures"}
