"""The expiry epochs' key records in the SQLite file (``keys.commitments.EpochRecords``; threat_model.md, "Expiry
epochs"): ``epoch_keys`` (the one recorded key of an epoch), ``epoch_reservations`` and ``epoch_tombstones``.
A mixin of SqliteCommitments: writes join the thread's open transaction, else run in one of their own."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vault.errors import IntegrityError, StorageError
from vault.storage.sqlite.schema import blob

if TYPE_CHECKING:
    from vault.storage.sqlite.store import SqliteStore

_LIVE = ("SELECT attempt, check_value FROM epoch_keys k WHERE length = ?1 AND epoch = ?2 AND NOT EXISTS (SELECT 1 "
         "FROM epoch_tombstones t WHERE t.length = ?1 AND t.epoch = ?2 AND t.attempt IN (0, k.attempt))")
_ABANDON = ("INSERT OR IGNORE INTO epoch_tombstones (length, epoch, attempt, check_value, swept) "
            "SELECT length, epoch, attempt, x'', 0 FROM epoch_reservations r WHERE reserved_at < ? AND NOT EXISTS "
            "(SELECT 1 FROM epoch_keys k WHERE k.length = r.length AND k.epoch = r.epoch AND k.attempt = r.attempt)")
_TOP = ("SELECT max(a) FROM (SELECT max(attempt) AS a FROM epoch_reservations WHERE length = ?1 AND epoch = ?2 "
        "UNION ALL SELECT max(attempt) FROM epoch_tombstones WHERE length = ?1 AND epoch = ?2 "
        "UNION ALL SELECT max(attempt) FROM epoch_keys WHERE length = ?1 AND epoch = ?2)")
_CLOSED = "SELECT 1 FROM epoch_tombstones WHERE length = ?1 AND epoch = ?2 AND attempt = 0"
_PENDING = ("SELECT 1 FROM epoch_reservations WHERE length = ?1 AND epoch = ?2 AND attempt = ?3 "
            "AND NOT EXISTS (SELECT 1 FROM epoch_keys WHERE length = ?1 AND epoch = ?2 AND attempt = ?3) "
            "AND NOT EXISTS (SELECT 1 FROM epoch_tombstones WHERE length = ?1 AND epoch = ?2 AND attempt IN (0, ?3))")
_RECORD = ("INSERT OR IGNORE INTO epoch_keys (length, epoch, attempt, check_value) SELECT ?1, ?2, ?3, ?4 WHERE NOT "
           "EXISTS (SELECT 1 FROM epoch_tombstones WHERE length = ?1 AND epoch = ?2 AND attempt IN (0, ?3))")
_TOMBSTONE = ("INSERT OR IGNORE INTO epoch_tombstones (length, epoch, attempt, check_value, swept) "
              "VALUES (?1, ?2, ?3, coalesce((SELECT check_value FROM epoch_keys WHERE length = ?1 AND epoch = ?2 "
              "AND attempt = ?3), x''), 0)")
ENDED = "SELECT length, epoch FROM epoch_keys WHERE (epoch + 1) * length <= ?1 ORDER BY length, epoch"
# closing the epochs that ended by ?1: every attempt tombstoned (the key's with its commitment), a closing marker
# (attempt 0, no entry to sweep), then the key and reservations dropped
CLOSE = (
    "INSERT OR IGNORE INTO epoch_tombstones (length, epoch, attempt, check_value, swept) "
    "SELECT length, epoch, attempt, check_value, 0 FROM epoch_keys WHERE (epoch + 1) * length <= ?1",
    "INSERT OR IGNORE INTO epoch_tombstones (length, epoch, attempt, check_value, swept) "
    "SELECT length, epoch, attempt, x'', 0 FROM epoch_reservations WHERE (epoch + 1) * length <= ?1",
    "INSERT OR IGNORE INTO epoch_tombstones (length, epoch, attempt, check_value, swept) "
    "SELECT DISTINCT length, epoch, 0, x'', 1 FROM epoch_reservations WHERE (epoch + 1) * length <= ?1",
    "INSERT OR IGNORE INTO epoch_tombstones (length, epoch, attempt, check_value, swept) "
    "SELECT length, epoch, 0, x'', 1 FROM epoch_keys WHERE (epoch + 1) * length <= ?1",
    "DELETE FROM epoch_keys WHERE (epoch + 1) * length <= ?1",
    "DELETE FROM epoch_reservations WHERE (epoch + 1) * length <= ?1",
)
_TOMBSTONES = ("SELECT length, epoch, attempt, swept FROM epoch_tombstones WHERE attempt > 0 "
               "ORDER BY length, epoch, attempt")


class SqliteEpochRecords:
    """Epoch key commitments, reservations and tombstones (keys.commitments.EpochRecords)."""

    _store: SqliteStore

    def epoch_commitment(self, length: int, epoch: int) -> tuple[int, bytes] | None:
        """(attempt, commitment) of the epoch's live key, or None."""
        found = self._store.query(_LIVE, (length, epoch))
        return (_number(found[0][0]), blob(found[0][1])) if found else None

    def reserve_epoch(self, length: int, epoch: int, now: float, abandon_before: float) -> int | None:
        """The epoch's next attempt, reserved and committed before any key is written (never inside another
        transaction: the reservation must outlive a write that fails); None if the epoch is closed."""
        if self._store.in_transaction():
            raise StorageError("an epoch key cannot be reserved inside another write transaction")
        with self._store.transaction() as tx:
            run = tx.connection.execute
            run(_ABANDON, (abandon_before,))
            if run(_CLOSED, (length, epoch)).fetchone():
                return None
            attempt = _number(run(_TOP, (length, epoch)).fetchone()[0] or 0) + 1
            run("INSERT INTO epoch_reservations (length, epoch, attempt, reserved_at) VALUES (?, ?, ?, ?)",
                (length, epoch, attempt, now))
        return attempt

    def epoch_pending(self, length: int, epoch: int, attempt: int) -> bool:
        """Whether the attempt may still write its key."""
        return bool(self._store.query(_PENDING, (length, epoch, attempt)))

    def record_epoch_commitment(self, length: int, epoch: int, attempt: int, value: bytes) -> None:
        """Record the epoch's key; an epoch holds one (the first stays), and a closed epoch or a destroyed attempt
        none."""
        self._store.atomic([(_RECORD, (length, epoch, attempt, value))])

    def tombstone_epoch_attempt(self, length: int, epoch: int, attempt: int) -> None:
        """Destroy one attempt (its commitment dropped if it was the recorded key)."""
        self._store.atomic([(_TOMBSTONE, (length, epoch, attempt)),
                            ("DELETE FROM epoch_keys WHERE length = ? AND epoch = ? AND attempt = ?",
                             (length, epoch, attempt))])

    def close_epochs(self, ended_by: float) -> list[tuple[int, int]]:
        """Close the epochs that ended by ``ended_by`` (a destruction: it makes room on a full disk)."""
        def close(tx: object) -> list[tuple[int, int]]:
            run = tx.connection.execute  # type: ignore[attr-defined]
            found = run(ENDED, (ended_by,)).fetchall()
            for statement in CLOSE:
                run(statement, (ended_by,))
            return [(_number(length), _number(epoch)) for length, epoch in found]

        return self._store.deleting(close)

    def epoch_tombstones(self, unswept_only: bool) -> list[tuple[int, int, int, bool]]:
        """(length, epoch, attempt, swept) of destroyed attempts."""
        found = [(_number(length), _number(epoch), _number(attempt), swept == 1)
                 for length, epoch, attempt, swept in self._store.query(_TOMBSTONES)]
        return [found_one for found_one in found if not (unswept_only and found_one[3])]

    def mark_epochs_swept(self, attempts: list[tuple[int, int, int]]) -> None:
        """Record that these attempts' keyring entries are gone (makes room on a full disk, like a delete)."""
        statements = [("UPDATE epoch_tombstones SET swept = 1 WHERE length = ? AND epoch = ? AND attempt = ?", attempt)
                      for attempt in attempts]
        if statements and self._store.in_transaction():
            self._store.atomic(statements)
        elif statements:
            self._store.deleting(lambda tx: [tx.connection.execute(*statement) for statement in statements])

    def live_epochs(self) -> list[tuple[int, int]]:
        """(length, epoch) of every epoch with a recorded key."""
        found = self._store.query("SELECT length, epoch FROM epoch_keys ORDER BY (epoch + 1) * length, length")
        return [(_number(length), _number(epoch)) for length, epoch in found]


def _number(value: object) -> int:
    """An epoch length, number or attempt as the vault writes it; anything else (only a writer of the file makes
    it) is tampering."""
    if type(value) is not int or not 0 <= value < 2**63:
        raise IntegrityError("a stored epoch has the wrong type or range")
    return value
