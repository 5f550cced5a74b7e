"""The subcommands of ``scratchvault``: each opens the database, makes one library call and prints the result.

Errors are not handled here: every VaultError goes up to ``vault.ops.cli.main``, which turns it into one line on
stderr and an exit code. Output is text for people, or JSON with ``--json``; content is written only by
``read`` (it is the operator's to read), never in an error.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import io
import json
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from vault import storage
from vault.errors import IntegrityError, InvalidArgument, KeyUnavailable, StorageError, UnsafeStorage, VaultError
from vault.model import Principal
from vault.vault import Vault


class Progress:
    """Running totals of a long operation on stderr, only when stderr is a terminal (so cron mail and the
    journal stay clean)."""

    def __init__(self, label: str) -> None:
        self._label = label
        self._shown = False
        self.callback: Callable[[int], None] | None = self._show if sys.stderr.isatty() else None

    def _show(self, done: int) -> None:
        print(f"\rscratchvault {self._label}: {done:,} rows", end="", file=sys.stderr, flush=True)
        self._shown = True

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._shown:
            print(file=sys.stderr, flush=True)


def location(args: argparse.Namespace) -> str | Path:
    """``--db``: a postgresql:// URL as given (never made a Path: that would fold its ``//``), else a path
    (default: the platform data path)."""
    if args.db is None:
        return storage.default_location()
    return args.db if storage.url_scheme(args.db) is not None else Path(args.db)


def open_vault(args: argparse.Namespace, *, create: bool = False, **settings: Any) -> Vault:
    """The vault at ``--db`` (a path, or a postgresql:// URL). Only ``put`` creates a vault, so a mistyped path
    or URL is an error rather than a new, empty vault with a new key in the keyring."""
    where = location(args)
    shown = storage.display_location(where)  # a URL without its password
    if not create and isinstance(where, Path) and not where.exists():
        raise StorageError(f"no database at {shown} (the first put creates it)")
    if not create and storage.vault_id_at(where) is None:  # e.g. left by a put that failed
        raise StorageError(f"no database with a vault at {shown} (the first put creates it)")
    return Vault.open(where, **settings)


def emit(args: argparse.Namespace, data: Any, text: str) -> None:
    """Print ``data`` as one JSON document with ``--json``, else ``text``."""
    print(json.dumps(data, ensure_ascii=False) if args.json else text)


def principal(args: argparse.Namespace) -> Principal:
    """The principal a command acts for (--user, --actor, --channel)."""
    return Principal(args.user, actor=args.actor, channel=args.channel)


def put(args: argparse.Namespace) -> int:
    """Store a file or stdin as text (UTF-8), binary, or parsed JSON; prints the new row's id."""
    who = principal(args)
    with _observation(args.file, args.kind) as observation, open_vault(args, create=True) as vault:
        rep = vault.put(who, args.turn, args.step, args.executor, observation, ttl_seconds=args.ttl)
    emit(args, rep.to_dict(), rep.id)
    return 0


def read(args: argparse.Namespace) -> int:
    """A slice of a row: its text, raw bytes with --raw, or the ReadResult as JSON (also for binary)."""
    if args.raw and args.json:
        raise InvalidArgument("--raw and --json exclude each other")
    who = principal(args)
    with open_vault(args, max_read=args.max_read) as vault:
        result = vault.read(who, args.id, args.mode, args.n, start=args.start, end=args.end, turn_id=args.turn)
    if args.raw:
        data = base64.b64decode(result.content) if result.content_kind == "binary" else result.content.encode()
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    elif args.json or result.content_kind == "binary":
        print(json.dumps(result.to_dict(), ensure_ascii=False))
    else:
        print(result.content)
    if result.truncated and sys.stderr.isatty():
        print(f"scratchvault: units {result.start:,}-{result.end:,} of {result.full_size:,} shown (cut at "
              f"--max-read); use --mode range --start/--end for the rest", file=sys.stderr)
    return 0


def list_turn(args: argparse.Namespace) -> int:
    """The caller's live rows of a turn: ids, steps, kinds and sizes (summaries only with --json)."""
    with open_vault(args) as vault:
        reps = vault.list_for_turn(principal(args), args.turn)
    lines = [f"{rep.id}  step {rep.step_num}  {rep.content_kind}  {rep.size_bytes:,} bytes  expires "
             f"{_iso(rep.expires_at)}  {rep.executor_name}" for rep in reps]
    emit(args, [rep.to_dict() for rep in reps], "\n".join(lines) if lines else "(no rows)")
    return 0


def delete(args: argparse.Namespace) -> int:
    """Delete one of the user's rows."""
    with open_vault(args) as vault:
        vault.delete(principal(args), args.id)
    emit(args, {"deleted": args.id}, f"deleted {args.id}")
    return 0


def gc(args: argparse.Namespace) -> int:
    """Remove every expired row (they are unreadable already); safe to run from a timer at any time."""
    with open_vault(args) as vault, Progress("gc") as progress:
        removed = vault.gc(progress=progress.callback)
    emit(args, {"removed": removed}, f"gc removed {removed:,} expired row(s)")
    return 0


def stats(args: argparse.Namespace) -> int:
    """Rows and bytes, by key version, expired rows awaiting gc, free space and the reserve, and this process's
    counters."""
    with open_vault(args) as vault:
        facts = vault.stats()
    disk = facts["disk"]
    lines = [f"rows            {facts['rows']:,} ({facts['bytes']:,} bytes)",
             f"expired rows    {facts['expired_rows']:,} (awaiting gc)",
             f"disk            {disk['free_bytes']:,} bytes free, reserve {disk['reserve_bytes']:,} "
             f"(ballast {disk['ballast_bytes']:,})" if disk["free_bytes"] is not None else
             "disk            not visible from here (the PostgreSQL server keeps its own; doctor shows the "
             "database's size)"]
    lines += [f"key version {version:<3} {counts['rows']:,} rows ({counts['bytes']:,} bytes)"
              for version, counts in facts["by_key_version"].items()]
    lines += [f"counters        {', '.join(f'{name} {count}' for name, count in facts['counters'].items())}",
              f"keyring         {facts['keyring_backend']}"]
    emit(args, facts, "\n".join(lines))
    return 0


def rotate(args: argparse.Namespace) -> int:
    """Make a new key version primary for one user."""
    with open_vault(args) as vault:
        version = vault.rotate_owner_key(args.user)
    emit(args, {"key_version": version}, f"new primary key version {version}; run 'keys rewrap' next")
    return 0


def rewrap(args: argparse.Namespace) -> int:
    """Re-wrap older rows' data keys under the primary version (one user, or every user without --user)."""
    with open_vault(args) as vault, Progress("rewrap") as progress:
        done = vault.rewrap(args.user, progress=progress.callback)
    emit(args, {"rewrapped": done}, f"re-wrapped {done:,} row(s)")
    return 0


def retire(args: argparse.Namespace) -> int:
    """Remove key versions no row uses any more."""
    with open_vault(args) as vault:
        removed = vault.retire_old_key_versions(args.user)
    emit(args, {"retired": removed}, f"retired {removed} key version(s)")
    return 0


def shred(args: argparse.Namespace) -> int:
    """Crypto-shred one user: their keys, then their rows. Irreversible, hence --yes."""
    if not args.yes:
        raise InvalidArgument("shred destroys the user's keys and rows for good; add --yes to confirm")
    with open_vault(args) as vault, Progress("shred") as progress:
        removed = vault.shred_owner(args.user, progress=progress.callback)
    emit(args, {"deleted_rows": removed}, f"keyset destroyed; deleted {removed:,} row(s)")
    return 0


def maintain(args: argparse.Namespace) -> int:
    """gc, then rotate, rewrap and retire every owner's key (run it from a timer: README, "Scheduled key
    maintenance"); an owner whose step failed is listed by audit tag and makes the exit code that error's."""
    with open_vault(args) as vault, Progress("maintain") as progress:
        done = vault.maintain_keys(progress=progress.callback)
    facts = done.to_dict()
    lines = [f"maintain: gc removed {done.expired_removed:,} expired row(s); keys of {done.maintained:,} of "
             f"{done.owners:,} owner(s) rotated, {done.rewrapped:,} row(s) re-wrapped, {done.retired:,} key "
             "version(s) retired"]
    lines += [f"failed: user {failure['user']}: {failure['error']}: {failure['message']}"
              for failure in facts["failed"]]
    emit(args, facts, "\n".join(lines))
    if done.failed:
        first = done.failed[0][1]
        kind = next((kind for kind in (InvalidArgument, KeyUnavailable, IntegrityError, UnsafeStorage)
                     if isinstance(first, kind)), VaultError)
        raise kind(f"key maintenance failed for {len(done.failed)} of {done.owners} owner(s) (listed on "
                          f"stdout by audit tag); the others were done. Fix the cause and run it again. First: {first}")
    return 0


def audit_tag(args: argparse.Namespace) -> int:
    """The tags an identifier carries in this vault's audit records, to find one user's records."""
    if all(value is None for value in (args.user, args.actor, args.channel, args.turn)):
        raise InvalidArgument("give at least one of --user, --actor, --channel, --turn")
    with open_vault(args) as vault:
        tags = vault.audit_tags(user_id=args.user, actor=args.actor, channel=args.channel, turn_id=args.turn)
    emit(args, tags, "\n".join(f"{kind:<8} {tag}" for kind, tag in tags.items()))
    return 0


def doctor(args: argparse.Namespace) -> int:
    """Is the keyring acceptable and the database private? Exit 1 if not (changes nothing)."""
    from vault.ops.doctor import diagnose

    lines, safe = diagnose(location(args))
    emit(args, {"safe": safe, "report": lines}, "\n".join(lines))
    return 0 if safe else 1


def demo(args: argparse.Namespace) -> int:
    """The demo story, against the OS keyring, in a throwaway database unless --db is given."""
    from vault.ops import demo as demo_module

    out = io.StringIO() if args.json else sys.stdout
    code = demo_module.run(None if args.db is None else location(args), out)
    if isinstance(out, io.StringIO):
        print(json.dumps({"exit_code": code, "transcript": out.getvalue().splitlines()}, ensure_ascii=False))
    return code


@contextlib.contextmanager
def _observation(source: str, kind: str) -> Iterator[Any]:
    """What ``put`` stores: a text or binary stream (read chunk by chunk, never whole), or parsed JSON."""
    try:
        raw: BinaryIO = sys.stdin.buffer if source == "-" else open(source, "rb")
    except OSError as error:
        raise InvalidArgument(f"cannot read {source} ({error.strerror or type(error).__name__})") from None
    with contextlib.ExitStack() as stack:
        if source != "-":
            stack.enter_context(raw)
        if kind == "binary":
            yield raw
        elif kind == "text":  # strict UTF-8, line endings kept exactly
            yield io.TextIOWrapper(raw, encoding="utf-8", errors="strict", newline="")
        else:
            yield _parse_json(raw)


def _parse_json(raw: BinaryIO) -> Any:
    try:
        value = json.loads(raw.read())
    except json.JSONDecodeError as error:
        raise InvalidArgument(f"the input is not valid JSON (line {error.lineno}, column {error.colno})") from None
    except (ValueError, RecursionError):  # not UTF-8, or too deep or too large to parse
        raise InvalidArgument("the input is not valid JSON") from None
    if not isinstance(value, dict | list):
        raise InvalidArgument("JSON input must be an object or an array (store a scalar with --kind text)")
    return value


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
