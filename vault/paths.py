"""Where the database lives, and refusing places other accounts could tamper with.

The file is created 0600 by us before SQLite opens it, because SQLite gives the -wal and -shm files the
database file's mode. A directory we create is 0700. A database, -wal, -shm or directory that is writable by
group or others, owned by another account, or a symlinked database file is refused: whoever can write there
can swap the file under us.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import platformdirs

from keys.errors import InvalidArgument, UnsafeStorage

DEFAULT_NAME = "scratchpad.db"


def default_path() -> Path:
    """<user data dir>/scratchvault/scratchpad.db (platformdirs)."""
    return Path(platformdirs.user_data_dir("scratchvault", appauthor=False)) / DEFAULT_NAME


def prepare(path: object) -> Path:
    """Validate (and if new, create) the database file and its directory; returns the absolute path."""
    if path is None:
        target = default_path()
    elif isinstance(path, str | os.PathLike):
        try:
            raw = os.fspath(path)
        except Exception:  # a caller's __fspath__ may raise anything
            raise InvalidArgument("path's __fspath__ failed") from None
        if not isinstance(raw, str) or not raw or "\x00" in raw or raw == ":memory:" or raw.startswith("file:"):
            raise InvalidArgument("path must name a database file")
        target = Path(raw)
    else:
        raise InvalidArgument(f"path must be a str or os.PathLike, not {type(path).__name__}")
    target = Path(os.path.abspath(target))
    _prepare_directory(target.parent)
    _create_file(target)
    for candidate in (target, Path(f"{target}-wal"), Path(f"{target}-shm")):
        check_file(candidate)
    return target


def _prepare_directory(directory: Path) -> None:
    missing = [level for level in (directory, *directory.parents) if not level.exists()]
    for level in reversed(missing):  # each level we create is 0700, whatever the umask
        try:
            level.mkdir(mode=0o700)
            os.chmod(level, 0o700)
        except FileExistsError:
            pass
        except OSError as error:
            raise UnsafeStorage(f"cannot create the database directory ({error.strerror})") from None
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
    except OSError as error:
        raise UnsafeStorage(f"cannot create the database file ({error.strerror})") from None
    try:
        os.fchmod(descriptor, 0o600)
    finally:
        os.close(descriptor)


def check_file(candidate: Path) -> None:
    """Refuse a symlink, a non-regular file, or one that another account owns or may write."""
    try:
        info = os.lstat(candidate)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode):
        raise UnsafeStorage(f"refusing {candidate.name}: it is a symbolic link")
    if not stat.S_ISREG(info.st_mode):
        raise UnsafeStorage(f"refusing {candidate.name}: it is not a regular file")
    _check_owner_and_mode(info, candidate.name, candidate)


def _check_owner_and_mode(info: os.stat_result, what: str, where: Path) -> None:
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UnsafeStorage(
            f"refusing {what} ({where}): it is writable by group or others; chmod go-w it (0700 for the "
            f"directory, 0600 for the files)"
        )
    if info.st_uid not in (os.geteuid(), 0):
        raise UnsafeStorage(f"refusing {what} ({where}): it is owned by another account")
