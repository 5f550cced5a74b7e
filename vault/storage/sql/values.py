"""The checks on what comes back from either store's tables: a value of the wrong type or range was written by
someone else than the vault (a writer of the database), so it is an IntegrityError, never used."""

from __future__ import annotations

import hmac
import math
from collections.abc import Iterable, Mapping

from keys import MAX_KEY_VERSION, SealedLedger
from vault.errors import IntegrityError
from vault.storage.base import StoredRow

BIGINT_SEQS = 1 << 63  # the first seq a signed 64-bit column (PostgreSQL's bigint) cannot hold

_MAX = 2**63 - 1


def stores_id(found: tuple, row_id: bytes, owner_tag: bytes) -> bool:
    """Whether a row looked up by its seq (id in column 1, owner tag in column 2) stores this very id for this
    owner, compared in constant time before anything else of the row is used: a stale id meeting another row, or
    another owner's row, damaged or not, is a miss."""
    return (type(found[1]) is bytes and hmac.compare_digest(found[1], row_id)
            and type(found[2]) is bytes and hmac.compare_digest(found[2], owner_tag))


def held_by_another(found: tuple | None, row_id: bytes, owner_tag: bytes) -> bool:
    """Whether a row looked up by its seq alone (id in column 0, owner tag in column 1) stores this very id for
    another owner."""
    return (found is not None and type(found[0]) is bytes and hmac.compare_digest(found[0], row_id)
            and type(found[1]) is bytes and not hmac.compare_digest(found[1], owner_tag))


def storing_ids(asked: Iterable[tuple[bytes, object]], found_by: Mapping[object, tuple],
                owner_tag: bytes) -> list[tuple]:
    """Of the rows a batch lookup found (by the key each id was looked up by), those that store the id asked for
    this owner, in the order asked."""
    return [found for row_id, key in asked
            if (found := found_by.get(key)) is not None and stores_id(found, row_id, owner_tag)]


def blob(value: object) -> bytes:
    """A column that holds bytes; anything else is tampering."""
    if not isinstance(value, bytes):
        raise IntegrityError("a stored column that holds bytes holds something else")
    return value


def key_version(value: object) -> int:
    """A key version column as the vault writes it."""
    if type(value) is not int or not 0 <= value <= MAX_KEY_VERSION:
        raise IntegrityError("a stored key version has the wrong type or range")
    return value


def epoch_number(value: object) -> int:
    """An epoch length, number or attempt as the vault writes it."""
    if type(value) is not int or not 0 <= value < 2**63:
        raise IntegrityError("a stored epoch has the wrong type or range")
    return value


def is_swept(value: object) -> bool:
    """A tombstone's swept flag: true only as the vault writes it (1 on SQLite, true on PostgreSQL); anything else
    counts as unswept, so its entry is looked for again."""
    return value is True or (type(value) is int and value == 1)


def whole_seconds(ended_by: float) -> int:
    """``ended_by`` as whole seconds for the integer comparison ``epoch < ended_by / length`` (an epoch has ended by
    t exactly when ``(epoch + 1) * length <= floor(t)``), clamped to the range of a 64-bit integer."""
    if ended_by != ended_by or ended_by < 0:
        return -1
    return min(math.floor(ended_by), _MAX)


def check_columns(version: object, expires_at: object, size_bytes: object) -> None:
    """A row's typed clear columns (REAL expiry, INTEGER version and size) as the vault writes them."""
    if not (type(version) is int and 1 <= version <= MAX_KEY_VERSION and type(expires_at) is float
            and type(size_bytes) is int and 0 <= size_bytes < 2**63):
        raise IntegrityError("a stored row has columns of the wrong type")


def sealed_ledger(counter: object, body: object, tag: object) -> SealedLedger:
    """A deletion ledger as stored; a column of the wrong type is tampering."""
    if type(counter) is not int:
        raise IntegrityError("a stored deletion ledger has columns of the wrong type")
    return SealedLedger(counter, blob(body), blob(tag))


def stored_row(row: tuple, seq_limit: int) -> StoredRow:
    """A row as stored (the columns of a row lookup, in order); a column of another type or range than the table's
    (only a writer of the database makes one) is tampering. ``seq_limit``: the first seq the store cannot hold."""
    seq, row_id, owner_tag, turn_tag, key_version, expires_at, size_bytes, wrapped_key, metadata = row
    check_columns(key_version, expires_at, size_bytes)
    if type(seq) is not int or not 1 <= seq < seq_limit:
        raise IntegrityError("a stored row has columns of the wrong type")
    return StoredRow(seq, blob(row_id), blob(owner_tag), blob(turn_tag), key_version, expires_at,
                     size_bytes, blob(wrapped_key), blob(metadata))


def with_summaries(found: list[tuple], seq_limit: int) -> list[tuple[StoredRow, bytes | None]]:
    """Rows selected with their summary as the last column: (row, sealed summary or None if missing)."""
    return [(stored_row(row[:-1], seq_limit), None if row[-1] is None else blob(row[-1])) for row in found]
