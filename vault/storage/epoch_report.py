"""What doctor says of expiry epochs (threat_model.md, "Expiry epochs"), from the database alone: rows under no epoch
(written before format 3: a backup of them opens with the owner key until that key is retired), and epoch keys
that should be gone by now (no gc ran since the epoch ended, or the keyring refused a delete)."""

from __future__ import annotations

from vault.storage.base import Finding

DEFAULT_SKEW = 300  # doctor needs no settings: it judges by the default allowance (keys/epochs/schedule.py)
NO_EPOCH = "SELECT count(*) FROM rows WHERE {length}(wrapped_key) <> {size}"  # size: bound, EPOCH_WRAPPED_SIZE
LIVE = "SELECT length, epoch FROM epoch_keys"
UNSWEPT = "SELECT count(*) FROM epoch_tombstones WHERE attempt > 0 AND swept = {false}"


def epoch_findings(no_epoch: int, live: list[tuple[object, object]], unswept: int, now: float) -> list[Finding]:
    """Doctor's lines on epochs: live keys, overdue ones, destroyed ones still in the keyring, rows under none."""
    valid = [(length, epoch) for length, epoch in live if type(length) is int and type(epoch) is int and length > 0]
    overdue = sum((epoch + 1) * length + DEFAULT_SKEW <= now for length, epoch in valid)
    found = [Finding("", f"expiry epochs with a key {len(valid):,}, rows under no expiry epoch {no_epoch:,}")]
    if no_epoch:
        found.append(Finding("WARN", f"{no_epoch:,} row(s) written before format 3 are under no expiry epoch: copies "
                                     "of them open with their owner's key until it is retired; run rewrap"))
    if overdue or unswept or len(valid) != len(live):
        found.append(Finding("WARN", f"expiry epoch keys overdue: {overdue:,} past their end and the skew allowance "
                                     f"(run gc), {unswept:,} destroyed but not yet deleted from the keyring (gc "
                                     f"retries), {len(live) - len(valid):,} malformed record(s)"))
    return found
