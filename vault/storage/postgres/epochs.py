"""The expiry epochs' key records on PostgreSQL (``keys.commitments.EpochRecords``; threat_model.md, "Expiry
epochs"): the same three tables as the SQLite file's. A mixin of PostgresCommitments. Every write that changes an
epoch's attempts (a reservation, a commitment, a tombstone, closing) holds the key lock, which key creation holds
from its reservation check to its commitment: an attempt is never abandoned or an epoch closed while its key is
being written on another host."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING

from vault.errors import StorageError
from vault.storage.postgres.schema import KEYS_LOCK, LOCK_CLASS
from vault.storage.postgres.writes import PgWriteTx
from vault.storage.sqlite.epochs import _number, whole_seconds
from vault.storage.sqlite.schema import blob

if TYPE_CHECKING:
    from vault.storage.postgres.store import PostgresStore

KEY_LOCK = "SELECT pg_advisory_xact_lock(%s, %s)"

# as on SQLite (vault/storage/sqlite/epochs.py, VALID): rows no vault writes are left out and counted, never raised
VALID = ("(attempt >= 0 AND epoch >= 0 AND CASE WHEN length BETWEEN 60 AND 86400 "
         "THEN epoch < 9223372036854775807 / length ELSE false END)")
ENDED_BY = "CASE WHEN length BETWEEN 60 AND 86400 THEN epoch < %(by)s::bigint / length ELSE false END"
_UNSWEPT = " ON CONFLICT (length, epoch, attempt) DO UPDATE SET swept = false"


def checked(template: str) -> str:
    """A statement with ``{valid}``, ``{ended}`` and ``{unswept}`` replaced by the constants of this module (no value
    ever enters a statement's text)."""
    return template.replace("{valid}", VALID).replace("{ended}", ENDED_BY).replace("{unswept}", _UNSWEPT)


# the epoch's live key: (attempt, commitment). A put reads it inside its write transaction (EpochKeys.still_recorded)
# with LIVE_FOR_SHARE: the row lock makes a closing transaction (which deletes the row) wait until the put commits,
# and a put that waited on a closing one finds no row once that one committed
LIVE = ("SELECT attempt, check_value FROM epoch_keys k WHERE length = %(len)s AND epoch = %(e)s AND NOT EXISTS "
        "(SELECT 1 FROM epoch_tombstones t WHERE t.length = %(len)s AND t.epoch = %(e)s "
        "AND t.attempt IN (0, k.attempt))")
LIVE_FOR_SHARE = LIVE + " FOR SHARE OF k"
_ABANDON = ("INSERT INTO epoch_tombstones (length, epoch, attempt, check_value, swept) "
            "SELECT length, epoch, attempt, '\\x'::bytea, false FROM epoch_reservations r WHERE reserved_at < %s AND "
            "NOT EXISTS (SELECT 1 FROM epoch_keys k WHERE k.length = r.length AND k.epoch = r.epoch AND "
            "k.attempt = r.attempt) ON CONFLICT DO NOTHING")
_TOP = ("SELECT max(a) FROM (SELECT max(attempt) AS a FROM epoch_reservations WHERE length = %(len)s AND epoch = %(e)s "
        "UNION ALL SELECT max(attempt) FROM epoch_tombstones WHERE length = %(len)s AND epoch = %(e)s "
        "UNION ALL SELECT max(attempt) FROM epoch_keys WHERE length = %(len)s AND epoch = %(e)s) AS attempts")
_CLOSED = "SELECT 1 FROM epoch_tombstones WHERE length = %(len)s AND epoch = %(e)s AND attempt = 0"
_PENDING = ("SELECT 1 FROM epoch_reservations WHERE length = %(len)s AND epoch = %(e)s AND attempt = %(a)s "
            "AND NOT EXISTS (SELECT 1 FROM epoch_keys WHERE length = %(len)s AND epoch = %(e)s AND attempt = %(a)s) "
            "AND NOT EXISTS (SELECT 1 FROM epoch_tombstones WHERE length = %(len)s AND epoch = %(e)s "
            "AND attempt IN (0, %(a)s))")
_RECORD = ("INSERT INTO epoch_keys (length, epoch, attempt, check_value) SELECT %(len)s, %(e)s, %(a)s, %(v)s "
           "WHERE NOT EXISTS (SELECT 1 FROM epoch_tombstones WHERE length = %(len)s AND epoch = %(e)s "
           "AND attempt IN (0, %(a)s)) ON CONFLICT DO NOTHING")
_TOMBSTONE = checked("INSERT INTO epoch_tombstones (length, epoch, attempt, check_value, swept) "
                     "VALUES (%(len)s, %(e)s, %(a)s, coalesce((SELECT check_value FROM epoch_keys WHERE length = "
                     "%(len)s AND epoch = %(e)s AND attempt = %(a)s), '\\x'::bytea), false){unswept}")
_MARKER = ("INSERT INTO epoch_tombstones (length, epoch, attempt, check_value, swept) "
           "VALUES (%(len)s, %(e)s, 0, '\\x'::bytea, true) ON CONFLICT DO NOTHING")
_ENDED = checked("SELECT length, epoch FROM epoch_keys WHERE {valid} AND {ended} ORDER BY length, epoch")
_CLOSE = tuple(checked(statement) for statement in (  # as on SQLite (vault/storage/sqlite/epochs.py, CLOSE)
    "INSERT INTO epoch_tombstones (length, epoch, attempt, check_value, swept) SELECT length, epoch, attempt, "
    "check_value, false FROM epoch_keys WHERE {valid} AND attempt > 0 AND {ended}{unswept}",
    "INSERT INTO epoch_tombstones (length, epoch, attempt, check_value, swept) SELECT length, epoch, attempt, "
    "'\\x'::bytea, false FROM epoch_reservations WHERE {valid} AND attempt > 0 AND {ended}{unswept}",
    "INSERT INTO epoch_tombstones (length, epoch, attempt, check_value, swept) "
    "SELECT length, epoch, 0, '\\x'::bytea, true FROM (SELECT length, epoch FROM epoch_reservations "
    "WHERE {valid} AND {ended} UNION SELECT length, epoch FROM epoch_keys WHERE {valid} AND {ended}) AS ended "
    "ON CONFLICT DO NOTHING",
    "DELETE FROM epoch_keys WHERE {valid} AND {ended}",
    "DELETE FROM epoch_reservations WHERE {valid} AND {ended}",
))
_TOMBSTONES = checked("SELECT length, epoch, attempt, swept FROM epoch_tombstones WHERE attempt > 0 AND {valid} "
                      "ORDER BY length, epoch, attempt")
_UNSWEPT_ONLY = _TOMBSTONES.replace("WHERE attempt > 0", "WHERE swept IS NOT TRUE AND attempt > 0")
_LISTED = checked("SELECT length, epoch FROM epoch_keys WHERE {valid} ORDER BY (epoch + 1) * length, length")
_ROW = checked("SELECT attempt FROM epoch_keys WHERE length = %(len)s AND epoch = %(e)s AND {valid}")
_OLDEST = checked("SELECT min(e) FROM (SELECT min(epoch) AS e FROM epoch_keys WHERE length = %(len)s AND {valid} "
                  "UNION ALL SELECT min(epoch) FROM epoch_reservations WHERE length = %(len)s AND {valid} "
                  "UNION ALL SELECT min(epoch) FROM epoch_tombstones WHERE length = %(len)s AND {valid}) AS oldest")
_BAD = checked("SELECT (SELECT count(*) FROM epoch_keys WHERE NOT coalesce({valid}, false)) + (SELECT count(*) "
               "FROM epoch_reservations WHERE NOT coalesce({valid}, false)) + (SELECT count(*) FROM epoch_tombstones "
               "WHERE NOT coalesce({valid}, false))")
EPOCH_TABLES = {"epoch_keys", "epoch_reservations", "epoch_tombstones"}


class PgEpochRecords:
    """Epoch key commitments, reservations and tombstones (keys.commitments.EpochRecords)."""

    _store: PostgresStore

    def locked(self) -> AbstractContextManager[object]:
        """A write transaction holding the key lock until the block ends."""
        return self._key_locked()

    @contextmanager
    def _key_locked(self) -> Iterator[PgWriteTx]:
        with self._store.transaction() as tx:
            tx._run(KEY_LOCK, (LOCK_CLASS, KEYS_LOCK))
            tx._locked.add((LOCK_CLASS, KEYS_LOCK))
            yield tx

    def _epoch_writing(self) -> AbstractContextManager[PgWriteTx]:
        """The thread's open write transaction (the key lock taken in it, if ``locked`` did not already), else a
        new one holding the key lock."""
        joined = self._store.open_transaction()
        if not isinstance(joined, PgWriteTx):
            return self._key_locked()
        if (LOCK_CLASS, KEYS_LOCK) not in joined._locked:
            joined._run(KEY_LOCK, (LOCK_CLASS, KEYS_LOCK))
            joined._locked.add((LOCK_CLASS, KEYS_LOCK))
        return nullcontext(joined)

    def epoch_commitment(self, length: int, epoch: int) -> tuple[int, bytes] | None:
        """(attempt, commitment) of the epoch's live key, or None."""
        found = self._store.query(LIVE, {"len": length, "e": epoch})
        return (_number(found[0][0]), blob(found[0][1])) if found else None

    def reserve_epoch(self, length: int, epoch: int, now: float, abandon_before: float) -> int | None:
        """The epoch's next attempt, in a committed transaction of its own under the key lock; None if closed."""
        if self._store.open_transaction() is not None:
            raise StorageError("an epoch key cannot be reserved inside another write transaction")
        with self._key_locked() as tx:
            tx._run(_ABANDON, (abandon_before,))
            if tx._one(_CLOSED, {"len": length, "e": epoch}):
                return None
            attempt = _number(tx._one(_TOP, {"len": length, "e": epoch})[0] or 0) + 1
            tx._run("INSERT INTO epoch_reservations (length, epoch, attempt, reserved_at) VALUES (%s, %s, %s, %s)",
                    (length, epoch, attempt, now))
        return attempt

    def epoch_pending(self, length: int, epoch: int, attempt: int) -> bool:
        """Whether the attempt may still write its key."""
        return bool(self._store.query(_PENDING, {"len": length, "e": epoch, "a": attempt}))

    def record_epoch_commitment(self, length: int, epoch: int, attempt: int, value: bytes) -> None:
        """Record the epoch's key; an epoch holds one (the first stays), and a closed epoch or a destroyed attempt
        none."""
        with self._epoch_writing() as tx:
            tx._run(_RECORD, {"len": length, "e": epoch, "a": attempt, "v": value})

    def tombstone_epoch_attempt(self, length: int, epoch: int, attempt: int) -> None:
        """Destroy one attempt (its commitment dropped if it was the recorded key)."""
        with self._epoch_writing() as tx:
            tx._run(_TOMBSTONE, {"len": length, "e": epoch, "a": attempt})
            tx._run("DELETE FROM epoch_keys WHERE length = %s AND epoch = %s AND attempt = %s",
                    (length, epoch, attempt))
            tx.must_stick |= EPOCH_TABLES

    def close_epochs(self, ended_by: float) -> list[tuple[int, int]]:
        """Close the epochs that ended by ``ended_by``, under the key lock; checked to stick before COMMIT."""
        by = whole_seconds(ended_by)
        with self._epoch_writing() as tx:
            found = tx._all(_ENDED, {"by": by})
            for statement in _CLOSE:
                tx._run(statement, {"by": by})
            tx.must_stick |= EPOCH_TABLES
        return [(_number(length), _number(epoch)) for length, epoch in found]

    def epoch_tombstones(self, unswept_only: bool) -> list[tuple[int, int, int, bool]]:
        """(length, epoch, attempt, swept) of destroyed attempts."""
        rows = self._store.query(_UNSWEPT_ONLY if unswept_only else _TOMBSTONES)  # each gc reads the unswept only
        found = [(_number(length), _number(epoch), _number(attempt), swept is True)
                 for length, epoch, attempt, swept in rows]
        return [found_one for found_one in found if not (unswept_only and found_one[3])]

    def mark_epochs_swept(self, attempts: list[tuple[int, int, int]]) -> None:
        """Record that these attempts' keyring entries are gone."""
        if not attempts:
            return
        with self._epoch_writing() as tx:
            for length, epoch, attempt in attempts:
                tx._run("UPDATE epoch_tombstones SET swept = true WHERE length = %s AND epoch = %s AND attempt = %s",
                        (length, epoch, attempt))

    def live_epochs(self) -> list[tuple[int, int]]:
        """(length, epoch) of every epoch with a recorded key (rows a writer planted out of range left out)."""
        return [(_number(length), _number(epoch)) for length, epoch in self._store.query(_LISTED)]

    def recorded_attempt(self, length: int, epoch: int) -> int | None:
        """The attempt of the epoch's key row, live or not (a sweep never deletes that attempt's entry early)."""
        found = self._store.query(_ROW, {"len": length, "e": epoch})
        return _number(found[0][0]) if found else None

    def oldest_epoch(self, length: int) -> int | None:
        """The lowest epoch of ``length`` the database lists anywhere, or None."""
        found = self._store.query(_OLDEST, {"len": length})[0][0]
        return None if found is None else _number(found)

    def close_found(self, attempts: list[tuple[int, int, int]]) -> None:
        """Tombstone (unswept) and close the epochs of entries found in the keyring that the database did not list."""
        if not attempts:
            return
        with self._epoch_writing() as tx:
            for length, epoch, attempt in attempts:
                tx._run(_TOMBSTONE, {"len": length, "e": epoch, "a": attempt})
                tx._run(_MARKER, {"len": length, "e": epoch})
            tx.must_stick |= EPOCH_TABLES

    def bad_epoch_rows(self) -> int:
        """How many rows of the epoch tables no vault writes (out of range): left out, for doctor."""
        return int(self._store.query(_BAD)[0][0])
