"""The expiry epochs' key records, written once for both stores (``keys.commitments.EpochRecords``; threat_model.md,
"Expiry epochs"): ``epoch_keys`` (the one recorded key of an epoch), ``epoch_reservations`` and ``epoch_tombstones``.

A row the vault could have written has integer columns (``{typed}``), an epoch length within the bounds, and an
epoch whose end fits in 63 bits (checked by division, so that no row makes the check overflow); any other row was
planted by a writer of the database, is left out of every listing and closing (one bad row must not stop the
destruction of every epoch), and is counted by ``bad_epoch_rows`` (doctor). A tombstone the vault writes is
unswept, even where a writer planted one marked swept: its entry must be deleted. Every change to the attempts
runs under the lock key creation holds (keys/epochs/keys.py), and closing, tombstoning and recording a found
entry mark the epoch tables as ones whose catalog must be exactly the vault's before they commit.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

from keys import MAX_EPOCH_SECONDS, MIN_EPOCH_SECONDS
from vault.errors import StorageError
from vault.storage.sql.session import KeyStore, Session
from vault.storage.sql.values import blob, epoch_number, is_swept, whole_seconds

EPOCH_TABLES = frozenset({"epoch_keys", "epoch_reservations", "epoch_tombstones"})
_VALID = ("({typed} AND attempt >= 0 AND epoch >= 0 AND CASE WHEN length BETWEEN 60 AND 86400 "
          "THEN epoch < 9223372036854775807 / length ELSE {false} END)")
_ENDED = "CASE WHEN length BETWEEN 60 AND 86400 THEN epoch < CAST(%(by)s AS bigint) / length ELSE {false} END"
_UNSWEPT = " ON CONFLICT (length, epoch, attempt) DO UPDATE SET swept = {false}"
if (MIN_EPOCH_SECONDS, MAX_EPOCH_SECONDS) != (60, 86400):  # the bounds _VALID spells out
    raise ImportError("_VALID does not match keys.epochs' bounds")


def _checked(template: str) -> str:
    """A statement with ``{valid}``, ``{ended}`` and ``{unswept}`` replaced by the predicates of this module."""
    return template.replace("{valid}", _VALID).replace("{ended}", _ENDED).replace("{unswept}", _UNSWEPT)


# the epoch's live key: (attempt, commitment)
LIVE = ("SELECT attempt, check_value FROM epoch_keys k WHERE length = %(len)s AND epoch = %(e)s AND NOT EXISTS "
        "(SELECT 1 FROM epoch_tombstones t WHERE t.length = %(len)s AND t.epoch = %(e)s "
        "AND t.attempt IN (0, k.attempt))")
_ABANDON = ("INSERT INTO epoch_tombstones (length, epoch, attempt, check_value, swept) "
            "SELECT length, epoch, attempt, {empty}, {false} FROM epoch_reservations r "
            "WHERE reserved_at < {now} - %(allowance)s AND NOT EXISTS (SELECT 1 FROM epoch_keys k "
            "WHERE k.length = r.length AND k.epoch = r.epoch AND k.attempt = r.attempt) "
            "ON CONFLICT (length, epoch, attempt) DO NOTHING")
_TOP = ("SELECT max(a) FROM (SELECT max(attempt) AS a FROM epoch_reservations WHERE length = %(len)s "
        "AND epoch = %(e)s UNION ALL SELECT max(attempt) FROM epoch_tombstones WHERE length = %(len)s "
        "AND epoch = %(e)s UNION ALL SELECT max(attempt) FROM epoch_keys WHERE length = %(len)s "
        "AND epoch = %(e)s) AS attempts")
_CLOSED = "SELECT 1 FROM epoch_tombstones WHERE length = %(len)s AND epoch = %(e)s AND attempt = 0"
_RESERVE = ("INSERT INTO epoch_reservations (length, epoch, attempt, reserved_at) "
            "VALUES (%(len)s, %(e)s, %(a)s, {now})")
_PENDING = ("SELECT 1 FROM epoch_reservations WHERE length = %(len)s AND epoch = %(e)s AND attempt = %(a)s "
            "AND NOT EXISTS (SELECT 1 FROM epoch_keys WHERE length = %(len)s AND epoch = %(e)s AND attempt = %(a)s) "
            "AND NOT EXISTS (SELECT 1 FROM epoch_tombstones WHERE length = %(len)s AND epoch = %(e)s "
            "AND attempt IN (0, %(a)s))")
_RECORD = ("INSERT INTO epoch_keys (length, epoch, attempt, check_value) SELECT %(len)s, %(e)s, %(a)s, %(v)s "
           "WHERE NOT EXISTS (SELECT 1 FROM epoch_tombstones WHERE length = %(len)s AND epoch = %(e)s "
           "AND attempt IN (0, %(a)s)) ON CONFLICT (length, epoch) DO NOTHING")
_TOMBSTONE = _checked("INSERT INTO epoch_tombstones (length, epoch, attempt, check_value, swept) "
                      "SELECT %(len)s, %(e)s, %(a)s, coalesce((SELECT check_value FROM epoch_keys WHERE length = "
                      "%(len)s AND epoch = %(e)s AND attempt = %(a)s), {empty}), {false} WHERE 1 = 1{unswept}")
_DROP = "DELETE FROM epoch_keys WHERE length = %(len)s AND epoch = %(e)s AND attempt = %(a)s"
_MARKER = ("INSERT INTO epoch_tombstones (length, epoch, attempt, check_value, swept) "
           "VALUES (%(len)s, %(e)s, 0, {empty}, {true}) ON CONFLICT (length, epoch, attempt) DO NOTHING")
_ENDED_KEYS = _checked("SELECT length, epoch FROM epoch_keys WHERE {valid} AND {ended} ORDER BY length, epoch")
# closing the epochs that ended by %(by)s: every attempt tombstoned unswept (the key's with its commitment), a closing
# marker (attempt 0, no entry to sweep), then the key and reservations dropped
_CLOSE = tuple(_checked(statement) for statement in (
    "INSERT INTO epoch_tombstones (length, epoch, attempt, check_value, swept) SELECT length, epoch, attempt, "
    "check_value, {false} FROM epoch_keys WHERE {valid} AND attempt > 0 AND {ended}{unswept}",
    "INSERT INTO epoch_tombstones (length, epoch, attempt, check_value, swept) SELECT length, epoch, attempt, "
    "{empty}, {false} FROM epoch_reservations WHERE {valid} AND attempt > 0 AND {ended}{unswept}",
    "INSERT INTO epoch_tombstones (length, epoch, attempt, check_value, swept) "
    "SELECT length, epoch, 0, {empty}, {true} FROM (SELECT length, epoch FROM epoch_reservations "
    "WHERE {valid} AND {ended} UNION SELECT length, epoch FROM epoch_keys WHERE {valid} AND {ended}) AS ended "
    "WHERE 1 = 1 ON CONFLICT (length, epoch, attempt) DO NOTHING",
    "DELETE FROM epoch_keys WHERE {valid} AND {ended}",
    "DELETE FROM epoch_reservations WHERE {valid} AND {ended}",
))
_TOMBSTONES = _checked("SELECT length, epoch, attempt, swept FROM epoch_tombstones WHERE attempt > 0 AND {valid} "
                       "ORDER BY length, epoch, attempt")
_UNSWEPT_ONLY = _TOMBSTONES.replace("WHERE attempt > 0", "WHERE swept IS NOT {true} AND attempt > 0")
_MARK_SWEPT = ("UPDATE epoch_tombstones SET swept = {true} WHERE length = %(len)s AND epoch = %(e)s "
               "AND attempt = %(a)s")
_LISTED = _checked("SELECT length, epoch FROM epoch_keys WHERE {valid} ORDER BY (epoch + 1) * length, length")
_ROW = _checked("SELECT attempt FROM epoch_keys WHERE length = %(len)s AND epoch = %(e)s AND {valid}")
_OLDEST = _checked("SELECT min(e) FROM (SELECT min(epoch) AS e FROM epoch_keys WHERE length = %(len)s AND {valid} "
                   "UNION ALL SELECT min(epoch) FROM epoch_reservations WHERE length = %(len)s AND {valid} "
                   "UNION ALL SELECT min(epoch) FROM epoch_tombstones WHERE length = %(len)s AND {valid}) AS oldest")
_BAD = _checked("SELECT (SELECT count(*) FROM epoch_keys WHERE NOT coalesce({valid}, {false})) + (SELECT count(*) "
                "FROM epoch_reservations WHERE NOT coalesce({valid}, {false})) + (SELECT count(*) FROM "
                "epoch_tombstones WHERE NOT coalesce({valid}, {false}))")


def _attempt(length: int, epoch: int, attempt: int = 0) -> dict[str, int]:
    return {"len": length, "e": epoch, "a": attempt}


class EpochRecords:
    """``keys.commitments.EpochRecords`` over a store's KeyStore."""

    def __init__(self, store: KeyStore) -> None:
        self._keys = store
        self._sql = store.dialect.render

    def locked(self) -> AbstractContextManager[object]:
        """A write transaction holding the lock key creation holds until the block ends."""
        return self._keys.locked()

    def epoch_commitment(self, length: int, epoch: int) -> tuple[int, bytes] | None:
        """(attempt, commitment) of the epoch's live key, or None."""
        found = self._keys.read(self._sql(LIVE), _attempt(length, epoch))
        return (epoch_number(found[0][0]), blob(found[0][1])) if found else None

    def reserve_epoch(self, length: int, epoch: int, now: float, abandon_before: float) -> int | None:
        """The epoch's next attempt, reserved and committed before any key is written (never inside another
        transaction); None if the epoch is closed. Reservations older than the allowance ``now -
        abandon_before`` that never got a commitment are tombstoned on the way."""
        if abandon_before != abandon_before or now != now:
            raise StorageError("a reservation needs a clock reading")

        def reserve(session: Session) -> int | None:
            params = _attempt(length, epoch) | {"now": now, "allowance": max(0.0, now - abandon_before)}
            session.run(self._sql(_ABANDON), params)
            if session.one(self._sql(_CLOSED), params):
                return None
            attempt = epoch_number((session.one(self._sql(_TOP), params) or (None,))[0] or 0) + 1
            session.run(self._sql(_RESERVE), params | {"a": attempt})
            return attempt

        return self._keys.reserve(reserve)

    def epoch_pending(self, length: int, epoch: int, attempt: int) -> bool:
        """Whether the attempt may still write its key."""
        return bool(self._keys.read(self._sql(_PENDING), _attempt(length, epoch, attempt)))

    def record_epoch_commitment(self, length: int, epoch: int, attempt: int, value: bytes) -> None:
        """Record the epoch's key; an epoch holds one (the first stays), and a closed epoch or a destroyed attempt
        none."""
        params = _attempt(length, epoch, attempt) | {"v": value}
        self._keys.write(lambda session: session.run(self._sql(_RECORD), params))

    def tombstone_epoch_attempt(self, length: int, epoch: int, attempt: int) -> None:
        """Destroy one attempt (its commitment dropped if it was the recorded key)."""

        def destroy(session: Session) -> None:
            session.check_tables_before_commit(EPOCH_TABLES)
            session.run(self._sql(_TOMBSTONE), _attempt(length, epoch, attempt))
            session.run(self._sql(_DROP), _attempt(length, epoch, attempt))

        self._keys.write(destroy)

    def close_epochs(self, ended_by: float) -> list[tuple[int, int]]:
        """Close the epochs that ended by ``ended_by``, committed before any entry is deleted (a destruction: it
        makes room on a full disk); returns the (length, epoch) that had a key."""
        params = {"by": whole_seconds(ended_by)}

        def close(session: Session) -> list[tuple[int, int]]:
            session.check_tables_before_commit(EPOCH_TABLES)
            found = session.all(self._sql(_ENDED_KEYS), params)
            for statement in _CLOSE:
                session.run(self._sql(statement), params)
            return [(epoch_number(length), epoch_number(epoch)) for length, epoch in found]

        return self._keys.remove(close)

    def epoch_tombstones(self, unswept_only: bool) -> list[tuple[int, int, int, bool]]:
        """(length, epoch, attempt, swept) of destroyed attempts (each gc reads the unswept only)."""
        rows = self._keys.read(self._sql(_UNSWEPT_ONLY if unswept_only else _TOMBSTONES), {})
        found = [(epoch_number(length), epoch_number(epoch), epoch_number(attempt), is_swept(swept))
                 for length, epoch, attempt, swept in rows]
        return [one for one in found if not (unswept_only and one[3])]

    def mark_epochs_swept(self, attempts: list[tuple[int, int, int]]) -> None:
        """Record that these attempts' keyring entries are gone (makes room on a full disk, like a delete)."""
        if not attempts:
            return

        def mark(session: Session) -> None:
            for attempt in attempts:
                session.run(self._sql(_MARK_SWEPT), _attempt(*attempt))

        self._keys.remove(mark)

    def live_epochs(self) -> list[tuple[int, int]]:
        """(length, epoch) of every epoch with a recorded key (rows a writer planted out of range left out)."""
        found = self._keys.read(self._sql(_LISTED), {})
        return [(epoch_number(length), epoch_number(epoch)) for length, epoch in found]

    def recorded_attempt(self, length: int, epoch: int) -> int | None:
        """The attempt of the epoch's key row, live or not (a sweep never deletes that attempt's entry early)."""
        found = self._keys.read(self._sql(_ROW), _attempt(length, epoch))
        return epoch_number(found[0][0]) if found else None

    def oldest_epoch(self, length: int) -> int | None:
        """The lowest epoch of ``length`` the database lists anywhere, or None."""
        found = self._keys.read(self._sql(_OLDEST), {"len": length})[0][0]
        return None if found is None else epoch_number(found)

    def close_found(self, attempts: list[tuple[int, int, int]]) -> None:
        """Tombstone (unswept) and close the epochs of entries found in the keyring that the database did not list."""
        if not attempts:
            return

        def close(session: Session) -> None:
            session.check_tables_before_commit(EPOCH_TABLES)
            for attempt in attempts:
                session.run(self._sql(_TOMBSTONE), _attempt(*attempt))
                session.run(self._sql(_MARKER), _attempt(*attempt))

        self._keys.write(close)

    def bad_epoch_rows(self) -> int:
        """How many rows of the epoch tables no vault writes (out of range, wrong type): left out, for doctor."""
        return int(self._keys.read(self._sql(_BAD), {})[0][0])
