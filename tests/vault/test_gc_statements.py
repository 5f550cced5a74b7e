"""Round trips of gc's repair (vault/deletions.py): each owner's ledger of deleted rows is looked up in a number of
statements that does not grow with the rows it names, and the row a rollback wrote back is still removed."""

from __future__ import annotations

from tests.support.statements import statements_sent


def gc_after_writing_back_one_of(vault, owner, attacker, deleted: int) -> list[str]:
    """Put ``deleted`` rows, collect them all early (each enters the owner's ledger), write one back as an
    attacker would, and return the statements of the gc that removes it."""
    reps = [vault.put(owner, "t", step, "tool", f"row {step}", ttl_seconds=60) for step in range(deleted)]
    copy = attacker.save_row(attacker.seq_of(reps[0].id))
    assert vault.gc(now=reps[-1].expires_at) == deleted
    attacker.restore_row(copy)
    with statements_sent(vault) as sent:
        assert vault.gc() == 1
    assert reps[0].id not in attacker.row_ids()
    return sent


def test_gc_looks_up_a_ledger_in_as_many_statements_for_fifty_entries_as_for_five(vault, alice, attacker):
    """A ledger of 5 entries, then of 50: gc sends the same statements for both (one lookup per ledger, not one
    per entry), and each time removes the row written back after its delete."""
    five = gc_after_writing_back_one_of(vault, alice, attacker, 5)
    fifty = gc_after_writing_back_one_of(vault, alice, attacker, 45)
    assert len(fifty) == len(five), f"{len(five)} statements with 5 entries, {len(fifty)} with 50"
