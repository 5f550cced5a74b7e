"""The tests the Citus pass leaves out of the suites it runs with the vault on the coordinator (scripts/citus.sh,
``run_citus_suites``, which sets SCRATCHVAULT_TEST_POSTGRES_CITUS=1): each named here, and only here, with the
reason, deselected at collection and listed with that reason at the end of the run, never skipped in silence.

An entry is a glob over node ids. One that matches no collected test of a file the run collected is stale and
fails the collection: a renamed test must not leave an entry that no longer leaves anything out.

Loaded by tests/conftest.py (``leave_out`` after its own selection, ``report`` in its terminal summary).
"""

from __future__ import annotations

import fnmatch

import pytest

from tests.support.postgres import citus_required

TAMPERING = "tests/attacks/test_tampering.py::"
ONE_ROW_EDITS = ("chunks_reordered", "expires_at_as_text", "expires_at_earlier_still_future", "expires_at_later",
                 "expires_at_moved_into_past", "extra_chunk_appended", "first_chunk_resized", "key_version_changed",
                 "last_chunk_deleted", "last_chunk_resized", "metadata_resized", "middle_chunk_deleted",
                 "negative_numbers", "sealed_parts_as_text", "size_bytes_changed", "summary_deleted", "summary_resized",
                 "turn_tag_as_text", "wrapped_key_as_integer", "wrapped_key_resized", "same_owner_swaps",
                 "rows_trade_places", "row_moved_to_another_seq")
# (node id globs, why the Citus pass does not run them, and where what they check is covered instead). Each tamper
# test copies the vault into schemas of its own, each distributed anew (seconds apiece on Citus): the pass keeps
# the attacks that move or copy parts across owners (shards) and vaults, and leaves the ones that edit one row's
# own cells or move parts within one owner's rows (one shard), whose checks are the vault's whatever the store, to
# the PostgreSQL pass.
LEFT_OUT: tuple[tuple[tuple[str, ...], str], ...] = (
    ((TAMPERING + "test_every_column_tampered_never_yields_altered_content_or_deletes*",),
     "tampers a fresh copy of the vault per variant, open and closed: minutes per table on Citus; the sweep runs in "
     "the PostgreSQL pass"),
    ((TAMPERING + "test_flipped_byte_raises_integrity_error_or_not_found*",
      *(f"{TAMPERING}test_tampered_row_never_yields_altered_content[[]new-{edit}]" for edit in ONE_ROW_EDITS),
      TAMPERING + "test_parts_moved_between_two_turns_of_one_owner_are_detected*"),
     "edits one row's own cells or moves parts within one owner's rows (one shard): run in the PostgreSQL pass; "
     "this pass keeps the swaps and copies across owners and vaults, and the held-part and summary tampering"),
    (("tests/storage/postgres/test_postgres_store.py::*planted_index*[[]CREATE UNIQUE INDEX planted ON owner_keys "
      "(version)]",),
     "Citus refuses a unique index without the distribution column, so no one can plant this one on a distributed "
     "table; the other planted indexes run"),
)

_left_out: dict[str, int] = {}  # an entry's reason -> how many tests it left out of this run


def leave_out(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In the Citus pass, deselect (reported as such) the tests LEFT_OUT names; fail on a stale entry."""
    if not citus_required():
        return
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    files = {item.nodeid.split("::", 1)[0] for item in items}
    for item in items:
        reason = next((why for globs, why in LEFT_OUT if any(fnmatch.fnmatchcase(item.nodeid, glob)
                                                             for glob in globs)), None)
        if reason is None:
            kept.append(item)
        else:
            dropped.append(item)
            _left_out[reason] = _left_out.get(reason, 0) + 1
    stale = [glob for globs, _ in LEFT_OUT for glob in globs if glob.split("::", 1)[0] in files
             and not any(fnmatch.fnmatchcase(item.nodeid, glob) for item in dropped)]
    if stale:
        raise pytest.UsageError(f"tests/support/citus_pass.py: no collected test matches {stale}")
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def report(terminalreporter: pytest.TerminalReporter) -> None:
    """Each entry that left tests out of this run, with how many and why."""
    if not _left_out:
        return
    terminalreporter.section("left out of the Citus pass (tests/support/citus_pass.py)", sep="=", bold=True)
    for _, why in LEFT_OUT:
        if why in _left_out:
            terminalreporter.line(f"{_left_out[why]} tests: {why}")
