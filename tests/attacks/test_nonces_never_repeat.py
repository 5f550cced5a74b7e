"""No nonce repeats under one key, as a reader of the stored rows sees them (threat_model.md, "Nonces"): two rows
of one owner, turn and epoch share the epoch's wrap key and the turn's summary key, so their wrapped keys and
summaries carry different nonces; re-sealing a row (``extend_turn``) draws fresh nonces for its metadata under the
same data key and for its summary. Format 3 parts are a 5-byte head (format, epoch length) then the 96-bit nonce;
metadata is its nonce then the ciphertext. Both stores."""

from __future__ import annotations

from vault import Principal

ALICE = Principal("alice")
HEAD, NONCE = 5, 12


def nonce(attacker, row: str, part: str) -> bytes:
    stored = bytes(attacker.read(attacker.seq_of(row), part))
    start = 0 if part == "metadata" else HEAD
    return stored[start:start + NONCE]


def test_rows_under_one_wrap_key_and_one_summary_key_carry_different_nonces(vault, attacker):
    rows = [vault.put(ALICE, "t", step, "x", f"row {step}", ttl_seconds=600).id for step in range(3)]
    for part in ("wrapped_key", "summary"):
        found = [nonce(attacker, row, part) for row in rows]
        assert len(set(found)) == len(rows), f"a {part} nonce repeats under one key"


def test_resealing_a_row_draws_fresh_nonces_for_its_metadata_and_summary(vault, attacker, clock):
    row = vault.put(ALICE, "t", 1, "x", "extended twice", ttl_seconds=600).id
    before = {part: nonce(attacker, row, part) for part in ("metadata", "summary")}
    for ttl in (1200, 2400):
        clock.advance(1)
        assert vault.extend_turn(ALICE, "t", ttl) == 1
        after = {part: nonce(attacker, row, part) for part in ("metadata", "summary")}
        assert [part for part in after if after[part] == before[part]] == [], "a re-seal reused a nonce"
        before = after
