"""Free space on the database's file system: the reserve a put must leave free, and the ballast that lets delete
and gc run when the file system fills up anyway (threat_model.md, "Full disk").

SQLite needs room to delete: every page a delete changes is first appended to the WAL, and ``secure_delete``
writes more of them. So a put is refused (QuotaExceeded) when it would leave less than the reserve free, checked
before the write lock and again as its chunks go in. Something else can still fill the file system; for that, a
slice of the reserve is held in a preallocated file next to the database (``<db>-ballast``), which a delete, gc
or shred meeting a full file system truncates so that it can run; it is taken again once there is room.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vault.errors import QuotaExceeded, StorageError, VaultError
from vault.storage.base import Finding

MIB = 1 << 20
# The default reserve: at least 64 MiB (a gc of 5,000 rows grew the WAL to 5.5 MB before its checkpoint), and at
# least 1% of the file system, so that on a large volume the vault stops while other programs still have room.
RESERVE_FLOOR = 64 * MIB
RESERVE_SHARE = 100
# held of the reserve (at most half of it). On a full tmpfs a delete wrote 33 KB of WAL, a gc or shred batch of
# FULL_DISK_BATCH rows at most 136 KB: 1 MiB is some 8 times that.
BALLAST_BYTES = 1 * MIB
# WAL a one-row delete writes per MiB of the row's content: 78 KB for 8 MiB and 202 KB for 32 MiB measured on a full
# tmpfs (some 5 KB per MiB above a base), with slack
DELETE_LOG_PER_MIB = 8 * 1024
CHECK_EVERY = 16  # chunks (1 MiB of plaintext) a streaming put writes between two checks
SMALL_PUT = 1 * MIB  # a put this small skips the checks while the file system was last seen roomy ...
ROOMY = 256 * MIB  # ... that is, this far above the reserve ...
ROOMY_SECONDS = 1.0  # ... at most this long ago (the write lock bounds what puts write in a second far below it)
ROW_SLACK = 64 * 1024  # a row's own pages besides its chunks: envelope, summary, index entries
REUSABLE = "SELECT freelist_count * page_size FROM pragma_freelist_count(), pragma_page_size()"


def default_reserve(total_bytes: int) -> int:
    """The reserve of a file system of ``total_bytes`` when none is set: max(64 MiB, 1% of it)."""
    return max(RESERVE_FLOOR, total_bytes // RESERVE_SHARE)


def put_needs(written: int, log_before: int, reusable: int) -> int:
    """Free space a put that has written ``written`` bytes of sealed chunks (and its row's own pages) may take in
    all: they land in the WAL, then in the database file when the WAL is checkpointed. The file grows by them, and
    by what the WAL held before the put began (``log_before``: frames not yet checkpointed), less the free pages
    it already has (``reusable``: left by deletes, reused before it grows)."""
    row = written + written // 16 + ROW_SLACK  # a sealed chunk (64 KiB and a tag) fills 17 pages of 4,092 bytes
    return row + max(0, row + log_before - reusable)


class DiskSpace:
    """The database's file system seen by one store: free space, the reserve (``None``: the default for that file
    system; 0: no reserve and no ballast) and the ballast file. Safe from any thread and any process."""

    def __init__(self, database: Path, reserve_bytes: int | None) -> None:
        self._directory = database.parent
        self._log = Path(f"{database}-wal")
        self.ballast_path = Path(f"{database}-ballast")
        self._reserve_bytes = reserve_bytes
        self.largest_record = 0  # bytes a delete rewrites whole: the largest ledger, or a large row's delete (note_row)
        self._roomy_until = 0.0  # time.monotonic() until which small puts skip their checks

    def usage(self) -> tuple[int, int]:
        """(bytes free for this account, bytes in all) on the database's file system."""
        try:
            info = os.statvfs(self._directory)
        except OSError as error:
            raise StorageError("cannot read the free space of the database's file system "
                               f"({error.strerror or type(error).__name__})") from None
        return info.f_bavail * info.f_frsize, info.f_blocks * info.f_frsize

    def reserve(self, total_bytes: int) -> int:
        """The reserve on a file system of ``total_bytes``."""
        return default_reserve(total_bytes) if self._reserve_bytes is None else self._reserve_bytes

    def log_bytes(self) -> int:
        """The WAL's size: a bound on what its frames not yet checkpointed may add to the database file."""
        try:
            return os.stat(self._log).st_size
        except OSError:
            return 0

    def room(self) -> Room:
        """One look at the file system: free space, the ballast, the reserve."""
        free, total = self.usage()
        reserve = self.reserve(total)
        return Room(free, self.ballast_held() if reserve else 0, reserve)

    def skip_small(self, size: int) -> bool:
        """Whether a put of ``size`` bytes may skip its checks: small, and the file system was found far above the
        reserve within the last second (a few statvfs and stat calls saved on every small put)."""
        return size <= SMALL_PUT and time.monotonic() < self._roomy_until

    def seen(self, room: Room, pending: int) -> None:
        """Remember whether ``room`` was far above the reserve once ``pending`` bytes are written."""
        self._roomy_until = time.monotonic() + ROOMY_SECONDS if room.spare(pending) >= ROOMY else 0.0

    def note_row(self, size_bytes: int) -> None:
        """A row of ``size_bytes`` of content is stored: the ballast grows to what deleting it alone writes to the
        WAL (delete_log_bytes), so that gc, delete and shred, which go down to one row per transaction on a full
        file system, can remove it (at most half the reserve: a larger row waits for space to be freed)."""
        self.note_record(delete_log_bytes(size_bytes))

    def note_record(self, size: int) -> None:
        """A record that deletes rewrite whole (an owner's ledger of deleted rows) is now ``size`` bytes: the
        ballast grows to match at its next refill."""
        self.largest_record = max(self.largest_record, size)

    def refill(self, room: Room) -> None:
        """Top the ballast up to its size when it is short and the file system has room (a put found the reserve
        free, or a delete that released it gave the space back). Best effort: where the file system cannot
        preallocate, or has no room, it stays short, and puts count the shortfall as used space."""
        size = ballast_size(room.reserve, self.largest_record)
        if room.held < size <= room.free + room.held:
            self._fill_ballast(size)

    def ballast_held(self) -> int:
        """Bytes the ballast file holds on disk (0 when it is missing, released, or not a plain file)."""
        try:
            info = os.lstat(self.ballast_path)
        except OSError:
            return 0
        return min(info.st_size, info.st_blocks * 512) if stat.S_ISREG(info.st_mode) else 0

    def _fill_ballast(self, size: int) -> None:
        """Preallocate the ballast to ``size`` bytes: a private file, never opened through a symlink."""
        try:
            descriptor = os.open(self.ballast_path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError:
            return
        try:
            if hasattr(os, "posix_fallocate"):
                os.posix_fallocate(descriptor, 0, size)
            else:  # no preallocation call here (macOS): zeros, written once
                os.pwrite(descriptor, bytes(size), 0)
        except OSError:
            pass
        finally:
            os.close(descriptor)

    def release_ballast(self) -> bool:
        """Give the ballast's space back to the file system (a delete or gc met a full one); whether it held any."""
        try:
            descriptor = os.open(self.ballast_path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            held = os.fstat(descriptor).st_blocks > 0
            os.ftruncate(descriptor, 0)
        except OSError:
            held = False
        finally:
            os.close(descriptor)
        return held

    def report(self) -> dict[str, Any]:
        """What ``stats()`` shows: free bytes, the reserve, what the ballast holds of it, the file system's size."""
        free, total = self.usage()
        return {"free_bytes": free, "reserve_bytes": self.reserve(total), "ballast_bytes": self.ballast_held(),
                "file_system_bytes": total}


@dataclass(frozen=True, slots=True)
class Room:
    """Bytes free on the file system, bytes the ballast holds, and the reserve (0: none)."""

    free: int
    held: int
    reserve: int

    def spare(self, pending: int) -> int:
        """Bytes left above the reserve once ``pending`` more are written; the ballast counts as free, being the
        reserve's own."""
        return self.free + self.held - pending - self.reserve if self.reserve else 1 << 62

    def refuse_if_short(self, pending: int) -> None:
        """QuotaExceeded (nothing stored) when ``pending`` more bytes would leave less than the reserve free."""
        if self.spare(pending) < 0:
            raise QuotaExceeded(
                f"refused: storing this would leave less than the vault's disk reserve ({self.reserve:,} bytes) "
                f"free on the database's file system ({self.free:,} bytes free, {self.held:,} more in its "
                "ballast); nothing was stored. Run gc, delete rows or free space there (the reserve keeps room for "
                "delete and gc; Vault.open(disk_reserve_bytes=...) sets it)")


def delete_log_bytes(size_bytes: int) -> int:
    """What deleting one row of ``size_bytes`` writes to the WAL at most: DELETE_LOG_PER_MIB per MiB of its chunks
    (the pages of the chunk b-tree and the free list it rewrites), whatever its summary and envelope take."""
    return (max(0, size_bytes) // MIB + 1) * DELETE_LOG_PER_MIB


def ballast_size(reserve: int, largest_record: int = 0) -> int:
    """How much of a reserve the ballast holds: enough for a delete to rewrite the largest ledger of deleted rows
    (its new pages, plus slack), at least BALLAST_BYTES, at most half the reserve."""
    return min(max(BALLAST_BYTES, largest_record + BALLAST_BYTES // 2), reserve // 2)


def findings(database: Path) -> list[Finding]:
    """Doctor's lines on the database's file system: free space against the default reserve (a warning below it),
    and the ballast. A vault opened with its own ``disk_reserve_bytes`` compares with that instead."""
    space = DiskSpace(database, None)
    try:
        report = space.report()
    except VaultError as error:
        return [Finding("FAIL", f"disk: {error}")]
    free, reserve, held = report["free_bytes"], report["reserve_bytes"], report["ballast_bytes"]
    facts = (f"{_mib(free)} free of {_mib(report['file_system_bytes'])} on the database's file system, default "
             f"reserve {_mib(reserve)} (max(64 MiB, 1%)), ballast {_mib(held)}")
    if free + held < reserve:
        return [Finding("WARN", f"disk: {facts}: below the reserve, puts are refused until gc, deletes or freed "
                                "space make room")]
    return [Finding("ok", f"disk: {facts}" + ("" if held else " (the next put makes it)"))]


def _mib(size: int) -> str:
    return f"{size / MIB:,.1f} MiB"
