"""The isolation state machine of test_isolation.py, extended to what the key lifecycle added: crypto-shredding,
rotation (with rewrap and retirement) and extend_turn, interleaved with everything the parent machine does (puts,
reads, listings, deletes, expiry, gc); and a shredded owner starts afresh. That a shredded owner leaves nothing on
disk is tests/attacks/test_at_rest.py.
"""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import rule

from tests.vault.test_isolation import CONTENT, PRINCIPALS, TURNS, EachPrincipalSeesExactlyItsOwnLiveRows
from vault import KeyUnavailable, NotFound, Vault


class EachPrincipalSeesExactlyItsOwnLiveRowsThroughShredsAndRotations(EachPrincipalSeesExactlyItsOwnLiveRows):
    """The parent's model and invariant (a principal reads exactly its own live rows), plus shred_owner,
    rotate/rewrap/retire and extend_turn; ``keyed`` is who holds a keyset (put since their last shred)."""

    def __init__(self) -> None:
        super().__init__()
        self.keyed: set[str] = set()

    @rule(target=EachPrincipalSeesExactlyItsOwnLiveRows.row_ids, principal=st.sampled_from(PRINCIPALS),
          turn=st.sampled_from(TURNS), step=st.integers(0, 4), ttl=st.sampled_from([50, 100, 1000]), content=CONTENT)
    def put(self, principal, turn, step, ttl, content):
        row_id = EachPrincipalSeesExactlyItsOwnLiveRows.put(self, principal, turn, step, ttl, content)
        self.keyed.add(principal.user_id)
        return row_id

    @rule(principal=st.sampled_from(PRINCIPALS))
    def shred(self, principal):
        user = principal.user_id
        theirs = [row_id for row_id, row in self.rows.items() if row[0] == user]
        assert self.vault.shred_owner(user) == len(theirs)  # expired-but-uncollected rows go too
        for row_id in theirs:
            del self.rows[row_id]
        self.keyed.discard(user)

    @rule(principal=st.sampled_from(PRINCIPALS))
    def rotate_rewrap_retire(self, principal):
        user = principal.user_id
        if user not in self.keyed:
            with pytest.raises(KeyUnavailable):
                self.vault.rotate_owner_key(user)
            return
        assert self.vault.rotate_owner_key(user) >= 2
        assert self.vault.rewrap(user) == sum(row[0] == user for row in self.rows.values())
        assert self.vault.retire_old_key_versions(user) == 1

    @rule(principal=st.sampled_from(PRINCIPALS), turn=st.sampled_from(TURNS), ttl=st.sampled_from([10, 200, 2000]))
    def extend(self, principal, turn, ttl):
        now = self.clock.now
        extended = [row_id for row_id, row in self.rows.items()
                    if row[:2] == (principal.user_id, turn) and now < row[4] < now + ttl]
        assert self.vault.extend_turn(principal, turn, ttl) == len(extended)
        for row_id in extended:
            self.rows[row_id] = (*self.rows[row_id][:4], now + ttl)


TestEachPrincipalSeesExactlyItsOwnLiveRowsThroughShredsAndRotations = (
    EachPrincipalSeesExactlyItsOwnLiveRowsThroughShredsAndRotations.TestCase)
TestEachPrincipalSeesExactlyItsOwnLiveRowsThroughShredsAndRotations.settings = settings(
    max_examples=30, stateful_step_count=30, deadline=None, database=None)


def test_shredded_owner_starts_afresh_and_the_old_keys_never_come_back(db_path, keyring_backend, clock, alice):
    with Vault.open(db_path, keyring_backend=keyring_backend, clock=clock) as vault:
        old = vault.put(alice, "t", 1, "tool", "before the shred")
        old_entries = dict(keyring_backend.secrets)
        vault.shred_owner(alice.user_id)
        new = vault.put(alice, "t", 1, "tool", "after the shred")
        assert [rep.id for rep in vault.list_for_turn(alice, "t")] == [new.id]
        with pytest.raises(NotFound):
            vault.get(alice, old.id)
    changed = {k for k in keyring_backend.secrets if old_entries.get(k) != keyring_backend.secrets[k]}
    assert len(changed) == 1, "the owner's new keyset should be the only keyring change"
