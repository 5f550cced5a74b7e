"""The expiry epochs' key records in the SQLite file (``keys.commitments.EpochRecords``; threat_model.md, "Expiry
epochs"): ``epoch_keys`` (the one recorded key of an epoch), ``epoch_reservations`` and ``epoch_tombstones``.
A mixin of SqliteCommitments: writes join the thread's open transaction, else run in one of their own."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from keys.epochs import MAX_EPOCH_SECONDS, MIN_EPOCH_SECONDS
from vault.errors import IntegrityError, StorageError
from vault.storage.sqlite.schema import blob

if TYPE_CHECKING:
    from vault.storage.sqlite.store import SqliteStore

_MAX = 2**63 - 1

# a row the vault could have written: an epoch length within the bounds, and an epoch whose end fits in 63 bits
# (checked by division, so that no row makes the check overflow); any other row was planted by a writer of the file,
# is left out of every listing and destruction (one bad row must not stop the destruction of every epoch), and is
# counted by ``bad_epoch_rows`` (doctor)
VALID = ("(typeof(length) = 'integer' AND typeof(epoch) = 'integer' AND typeof(attempt) = 'integer' AND attempt >= 0 "
         "AND epoch >= 0 AND CASE WHEN length BETWEEN 60 AND 86400 THEN epoch < 9223372036854775807 / length "
         "ELSE false END)")
ENDED_BY = "CASE WHEN length BETWEEN 60 AND 86400 THEN epoch < ?1 / length ELSE false END"
if (MIN_EPOCH_SECONDS, MAX_EPOCH_SECONDS) != (60, 86400):  # the bounds VALID spells out
    raise ImportError("VALID does not match keys.epochs' bounds")

# a tombstone the vault writes is unswept, even where a writer planted one marked swept: its entry must be deleted
_UNSWEPT = " ON CONFLICT (length, epoch, attempt) DO UPDATE SET swept = 0"


def checked(template: str) -> str:
    """A statement with ``{valid}``, ``{ended}`` and ``{unswept}`` replaced by the constants of this module (no value
    ever enters a statement's text)."""
    return template.replace("{valid}", VALID).replace("{ended}", ENDED_BY).replace("{unswept}", _UNSWEPT)


# the epoch's live key: (attempt, commitment); a put reads it inside its write transaction (EpochKeys.still_recorded)
LIVE = ("SELECT attempt, check_value FROM epoch_keys k WHERE length = ?1 AND epoch = ?2 AND NOT EXISTS (SELECT 1 "
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
_TOMBSTONE = checked("INSERT INTO epoch_tombstones (length, epoch, attempt, check_value, swept) "
                     "VALUES (?1, ?2, ?3, coalesce((SELECT check_value FROM epoch_keys WHERE length = ?1 "
                     "AND epoch = ?2 AND attempt = ?3), x''), 0){unswept}")
_MARKER = ("INSERT OR IGNORE INTO epoch_tombstones (length, epoch, attempt, check_value, swept) "
           "VALUES (?1, ?2, 0, x'', 1)")
ENDED = checked("SELECT length, epoch FROM epoch_keys WHERE {valid} AND {ended} ORDER BY length, epoch")
# closing the epochs that ended by ?1: every attempt tombstoned unswept (the key's with its commitment), a closing
# marker (attempt 0, no entry to sweep), then the key and reservations dropped
CLOSE = tuple(checked(statement) for statement in (
    "INSERT INTO epoch_tombstones (length, epoch, attempt, check_value, swept) SELECT length, epoch, attempt, "
    "check_value, 0 FROM epoch_keys WHERE {valid} AND attempt > 0 AND {ended}{unswept}",
    "INSERT INTO epoch_tombstones (length, epoch, attempt, check_value, swept) SELECT length, epoch, attempt, x'', 0 "
    "FROM epoch_reservations WHERE {valid} AND attempt > 0 AND {ended}{unswept}",
    "INSERT OR IGNORE INTO epoch_tombstones (length, epoch, attempt, check_value, swept) "
    "SELECT DISTINCT length, epoch, 0, x'', 1 FROM epoch_reservations WHERE {valid} AND {ended}",
    "INSERT OR IGNORE INTO epoch_tombstones (length, epoch, attempt, check_value, swept) "
    "SELECT length, epoch, 0, x'', 1 FROM epoch_keys WHERE {valid} AND {ended}",
    "DELETE FROM epoch_keys WHERE {valid} AND {ended}",
    "DELETE FROM epoch_reservations WHERE {valid} AND {ended}",
))
_TOMBSTONES = checked("SELECT length, epoch, attempt, swept FROM epoch_tombstones WHERE attempt > 0 AND {valid} "
                      "ORDER BY length, epoch, attempt")
_UNSWEPT_ONLY = _TOMBSTONES.replace("WHERE attempt > 0", "WHERE swept IS NOT 1 AND attempt > 0")
_LISTED = checked("SELECT length, epoch FROM epoch_keys WHERE {valid} ORDER BY (epoch + 1) * length, length")
_ROW = checked("SELECT attempt FROM epoch_keys WHERE length = ?1 AND epoch = ?2 AND {valid}")
OLDEST = checked("SELECT min(e) FROM (SELECT min(epoch) AS e FROM epoch_keys WHERE length = ?1 AND {valid} "
                 "UNION ALL SELECT min(epoch) FROM epoch_reservations WHERE length = ?1 AND {valid} "
                 "UNION ALL SELECT min(epoch) FROM epoch_tombstones WHERE length = ?1 AND {valid})")
BAD = checked("SELECT (SELECT count(*) FROM epoch_keys WHERE NOT coalesce({valid}, false)) + (SELECT count(*) "
              "FROM epoch_reservations WHERE NOT coalesce({valid}, false)) + (SELECT count(*) FROM epoch_tombstones "
              "WHERE NOT coalesce({valid}, false))")

class SqliteEpochRecords:
    """Epoch key commitments, reservations and tombstones (keys.commitments.EpochRecords)."""

    _store: SqliteStore

    def epoch_commitment(self, length: int, epoch: int) -> tuple[int, bytes] | None:
        """(attempt, commitment) of the epoch's live key, or None."""
        found = self._store.query(LIVE, (length, epoch))
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
        by = whole_seconds(ended_by)

        def close(tx: object) -> list[tuple[int, int]]:
            run = tx.connection.execute  # type: ignore[attr-defined]
            found = run(ENDED, (by,)).fetchall()
            for statement in CLOSE:
                run(statement, (by,))
            return [(_number(length), _number(epoch)) for length, epoch in found]

        return self._store.deleting(close)

    def epoch_tombstones(self, unswept_only: bool) -> list[tuple[int, int, int, bool]]:
        """(length, epoch, attempt, swept) of destroyed attempts."""
        rows = self._store.query(_UNSWEPT_ONLY if unswept_only else _TOMBSTONES)  # each gc reads the unswept only
        found = [(_number(length), _number(epoch), _number(attempt), swept == 1)
                 for length, epoch, attempt, swept in rows]
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
        """(length, epoch) of every epoch with a recorded key (rows a writer planted out of range left out)."""
        found = self._store.query(_LISTED)
        return [(_number(length), _number(epoch)) for length, epoch in found]

    def recorded_attempt(self, length: int, epoch: int) -> int | None:
        """The attempt of the epoch's key row, live or not (a sweep never deletes that attempt's entry early)."""
        found = self._store.query(_ROW, (length, epoch))
        return _number(found[0][0]) if found else None

    def oldest_epoch(self, length: int) -> int | None:
        """The lowest epoch of ``length`` the database lists anywhere, or None."""
        found = self._store.query(OLDEST, (length,))[0][0]
        return None if found is None else _number(found)

    def close_found(self, attempts: list[tuple[int, int, int]]) -> None:
        """Tombstone (unswept) and close the epochs of entries found in the keyring that the database did not list."""
        statements = [(_TOMBSTONE, attempt) for attempt in attempts] + [(_MARKER, attempt[:2]) for attempt in attempts]
        if statements:
            self._store.atomic(statements)

    def bad_epoch_rows(self) -> int:
        """How many rows of the epoch tables no vault writes (out of range, wrong type): left out, for doctor."""
        return int(self._store.query(BAD)[0][0])


def whole_seconds(ended_by: float) -> int:
    """``ended_by`` as whole seconds for the integer comparison ``epoch < ended_by / length`` (an epoch has ended by
    t exactly when ``(epoch + 1) * length <= floor(t)``), clamped to the range of a 64-bit integer."""
    if ended_by != ended_by or ended_by < 0:
        return -1
    return min(math.floor(ended_by), _MAX)


def _number(value: object) -> int:
    """An epoch length, number or attempt as the vault writes it; anything else (only a writer of the file makes
    it) is tampering."""
    if type(value) is not int or not 0 <= value < 2**63:
        raise IntegrityError("a stored epoch has the wrong type or range")
    return value
