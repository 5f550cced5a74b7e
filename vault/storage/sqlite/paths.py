"""Where the database lives, and refusing places other accounts could tamper with.

The file is created 0600 by us before SQLite opens it, because SQLite gives the -wal and -shm files the
database file's mode; the writers' -lock and -lock-next files (writers.py) and the disk reserve's -ballast file
(space.py) are made with mode 0600 ourselves. Directories we create are 0700. Refused (UnsafeStorage): a
database, -wal, -shm, -lock, -lock-next, -ballast or directory writable by group or others or owned by another
account; an ancestor directory another account could rename or replace (writable by others without the sticky
bit, or owned by someone other than us or root); a symlinked database file. The file's identity is recorded at
open and checked again before every new connection, so a file swapped later is not followed.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import platformdirs

from vault.errors import InvalidArgument, UnsafeStorage
from vault.storage.sqlite.writers import lock_paths

DEFAULT_NAME = "scratchpad.db"


def default_path() -> Path:
    """<user data dir>/scratchvault/scratchpad.db (platformdirs)."""
    return Path(platformdirs.user_data_dir("scratchvault", appauthor=False)) / DEFAULT_NAME


def prepare(path: object) -> Path:
    """Validate (and if new, create) the database file and its directory; returns the absolute path."""
    target = Path(os.path.abspath(_as_path(path)))
    try:
        _check_ancestors(target.parent)
        _prepare_directory(target.parent)
        _create_file(target)
        for candidate in companions(target):
            check_file(candidate, lock=candidate in lock_paths(target))
    except OSError as error:
        raise UnsafeStorage(f"cannot use the database path ({error.strerror or type(error).__name__})") from None
    return target


def check_path_safety(target: Path) -> None:
    """The checks ``prepare`` makes, for an existing database, without creating anything."""
    try:
        _check_ancestors(target.parent)
        info = target.parent.stat()
        _check_owner_and_mode(info, "the database directory", target.parent)
        for candidate in companions(target):
            check_file(candidate, lock=candidate in lock_paths(target))
    except OSError as error:
        raise UnsafeStorage(f"cannot use the database path ({error.strerror or type(error).__name__})") from None


def companions(target: Path) -> tuple[Path, ...]:
    """The database file and the files kept beside it: SQLite's -wal and -shm, the disk reserve's -ballast, and
    the writers' lock files (writers.py)."""
    return target, Path(f"{target}-wal"), Path(f"{target}-shm"), Path(f"{target}-ballast"), *lock_paths(target)


def identity(path: Path) -> tuple[int, int]:
    """(device, inode) of the database file, to recognise it later."""
    try:
        info = os.lstat(path)
    except OSError as error:
        raise UnsafeStorage(f"cannot use the database path ({error.strerror})") from None
    return info.st_dev, info.st_ino


def check_identity(path: Path, expected: tuple[int, int]) -> None:
    """Refuse to connect again if the file at ``path`` is no longer the one opened (or became a symlink)."""
    try:
        check_file(path)
        same = identity(path) == expected
    except OSError:
        same = False
    if not same:
        raise UnsafeStorage("refusing the database file: it was replaced after the vault opened it")


def _as_path(path: object) -> Path:
    if path is None:
        return default_path()
    if not isinstance(path, str | os.PathLike):
        raise InvalidArgument(f"path must be a str or os.PathLike, not {type(path).__name__}")
    try:
        raw = os.fspath(path)
    except Exception:  # a caller's __fspath__ may raise anything
        raise InvalidArgument("path's __fspath__ failed") from None
    if not isinstance(raw, str) or not raw or "\x00" in raw or raw == ":memory:" or raw.startswith("file:"):
        raise InvalidArgument("path must name a database file")
    return Path(raw)


def _check_ancestors(directory: Path) -> None:
    """Every existing ancestor must be ours or root's, and not writable by others unless sticky (like /tmp)."""
    for ancestor in directory.parents:
        if not ancestor.exists():
            continue  # made by _prepare_directory, 0700
        info = ancestor.stat()
        sticky = info.st_mode & stat.S_ISVTX
        if info.st_uid not in (os.geteuid(), 0) or (info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not sticky):
            raise UnsafeStorage(
                f"refusing the database path: its ancestor {ancestor} could be replaced by another account "
                f"(owned by another user, or writable by group or others without the sticky bit)"
            )


def _prepare_directory(directory: Path) -> None:
    missing = [level for level in (directory, *directory.parents) if not level.exists()]
    for level in reversed(missing):  # each level we create is 0700, whatever the umask
        try:
            level.mkdir(mode=0o700)
            os.chmod(level, 0o700)
        except FileExistsError:
            pass
    info = directory.stat()
    if not stat.S_ISDIR(info.st_mode):
        raise InvalidArgument("the database path's parent is not a directory")
    _check_owner_and_mode(info, "the database directory", directory)


def _create_file(target: Path) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        descriptor = os.open(target, flags, 0o600)
    except FileExistsError:
        return  # existing (or just made by another process): checked below like any existing file
    try:
        os.fchmod(descriptor, 0o600)
    finally:
        os.close(descriptor)


def check_file(candidate: Path, lock: bool = False) -> None:
    """Refuse a symlink, a non-regular file, or one that another account owns or may write (or, for a ``lock``
    file, may read)."""
    try:
        info = os.lstat(candidate)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode):
        raise UnsafeStorage(f"refusing {candidate.name}: it is a symbolic link")
    if not stat.S_ISREG(info.st_mode):
        raise UnsafeStorage(f"refusing {candidate.name}: it is not a regular file")
    _check_owner_and_mode(info, candidate.name, candidate)
    if lock and info.st_mode & (stat.S_IRGRP | stat.S_IROTH):
        raise UnsafeStorage(f"refusing {candidate.name}: it is readable by group or others, and whoever can open it "
                            "can hold the write lock (flock needs only a read); chmod 600 it")


def _check_owner_and_mode(info: os.stat_result, what: str, where: Path) -> None:
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UnsafeStorage(
            f"refusing {what} ({where}): it is writable by group or others; chmod go-w it (0700 for the "
            f"directory, 0600 for the files)"
        )
    if info.st_uid not in (os.geteuid(), 0):
        raise UnsafeStorage(f"refusing {what} ({where}): it is owned by another account")
