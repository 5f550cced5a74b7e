"""The ``scratchvault`` command (``python -m vault``): a thin layer that maps library errors to exit codes.

Exit codes: 0 ok; 1 not found (missing, expired, or another user's id: one answer); 2 usage (argparse) or an
invalid argument; 3 key unavailable (keyring missing, locked, failing or inconsistent); 4 integrity failure
(stored bytes failed authentication; nothing was deleted); 5 storage or environment (unsafe path, no
database, busy or closed database, unusable audit log); 70 internal error (a bug); 130 interrupted; 141
stdout closed early (as SIGPIPE would). ``doctor``
exits 1 when something is unsafe. An error is one line on stderr (a JSON object with ``--json``): the error
kind and the library's message, which never holds content; never a traceback.

Audit records (vault/audit.py) are appended as JSON lines to ``--audit-log PATH`` or ``$SCRATCHVAULT_AUDIT_LOG``
(created 0600; ``-`` is stderr, which journald captures under systemd); without either, none are written.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import stat
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from vault.audit import AUDIT_LOGGER
from vault.errors import IntegrityError, InvalidArgument, KeyUnavailable, NotFound, UnsafeStorage, VaultError
from vault.ops import commands, mcp_command

EXIT_CODES = ((NotFound, 1), (InvalidArgument, 2), (KeyUnavailable, 3), (IntegrityError, 4), (VaultError, 5))
EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_BROKEN_PIPE = 2, 70, 130, 141
AUDIT_LOG_ENV = "SCRATCHVAULT_AUDIT_LOG"
QUIET_LOGGERS = ("scratchvault", "psycopg")  # psycopg's pool logs connection failures (never a password, but noise)
DESCRIPTION = """Operate a scratchvault database: store, read, list, delete, collect expired rows, manage keys,
serve scratchpad_read over MCP.

exit codes: 0 ok, 1 not found (or another user's id), 2 usage or invalid argument, 3 key unavailable,
4 integrity failure, 5 storage or environment, 70 internal error, 130 interrupted, 141 output closed;
doctor: 1 if anything is unsafe. Audit records: --audit-log PATH or $SCRATCHVAULT_AUDIT_LOG ('-': stderr)."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (exit 2) like every other error."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The command line: every subcommand takes --db, --json and --audit-log."""
    common = _Parser(add_help=False)
    common.add_argument("--db", default=None, help="database path, or a postgresql:// URL (default: the platform "
                        "data path)")
    common.add_argument("--json", action="store_true", help="machine-readable output (and error line)")
    common.add_argument("--audit-log", default=os.environ.get(AUDIT_LOG_ENV), metavar="PATH",
                        help=f"append audit records as JSON lines ('-': stderr; default ${AUDIT_LOG_ENV})")
    who = _Parser(add_help=False)
    who.add_argument("--user", required=True, help="the user the call acts for (owner of the rows)")
    who.add_argument("--actor", default=None, help="optional actor of the principal (audit only)")
    who.add_argument("--channel", default=None, help="optional channel of the principal (audit only)")
    parser = _Parser(prog="scratchvault", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, handler: Any, help: str, *parents: argparse.ArgumentParser,
                into: Any = sub) -> argparse.ArgumentParser:
        created = into.add_parser(name, help=help, description=help, parents=[common, *parents])
        created.set_defaults(handler=handler)
        return created

    _row_commands(command, who)
    key_sub = sub.add_parser("keys", help="key rotation, rewrap, retirement and crypto-shredding").add_subparsers(
        dest="key_command", required=True, metavar="ACTION")
    _key_commands(lambda *args: command(*args, into=key_sub))
    tag = command("audit-tag", commands.audit_tag, "print the audit-record tags of identifiers")
    for option in ("--user", "--actor", "--channel", "--turn"):
        tag.add_argument(option, default=None)
    command("doctor", commands.doctor, "is the keyring acceptable and the database private? (exit 1 if not)")
    mcp_command.add_command(command)
    command("demo", commands.demo, "two users, slices, a refused cross-user read, expiry, gc and shredding "
            "(throwaway database unless --db)")
    return parser


def _row_commands(command: Callable[..., argparse.ArgumentParser], who: argparse.ArgumentParser) -> None:
    """put, read, list, delete, gc and stats."""
    put = command("put", commands.put, "store a file or stdin as one row; prints its id", who)
    put.add_argument("file", nargs="?", default="-", help="file to store (default or '-': stdin)")
    put.add_argument("--turn", required=True, help="turn id the row belongs to")
    put.add_argument("--step", type=int, default=0, help="step number (default 0)")
    put.add_argument("--executor", default="cli", help="executor (tool) name (default 'cli')")
    put.add_argument("--ttl", type=float, default=3600.0, help="lifetime in seconds (default 3600)")
    put.add_argument("--kind", choices=("text", "binary", "json"), default="text",
                     help="text: UTF-8 (default); binary: any bytes; json: an object or array, parsed")
    read = command("read", commands.read, "print a slice of a row (binary: JSON with Base64, or --raw)", who)
    read.add_argument("id")
    read.add_argument("--turn", default=None, help="only if the row belongs to this turn")
    read.add_argument("--mode", choices=("head", "tail", "full", "range"), default="head")
    read.add_argument("--n", type=int, default=2000, help="units for head/tail (chars; bytes for binary)")
    read.add_argument("--start", type=int, default=None, help="range start (inclusive)")
    read.add_argument("--end", type=int, default=None, help="range end (exclusive)")
    read.add_argument("--raw", action="store_true", help="write the slice itself to stdout (binary as bytes)")
    read.add_argument("--max-read", type=int, default=16000, help="cap on units returned (default 16000)")
    command("list", commands.list_turn, "list a user's live rows of a turn", who).add_argument(
        "--turn", required=True, help="turn id")
    command("delete", commands.delete, "delete one of a user's rows", who).add_argument("id")
    command("gc", commands.gc, "remove expired rows (run it from a timer)")
    command("stats", commands.stats, "rows, bytes, key versions, expired rows, counters")
    command("maintain", commands.maintain, "gc, then rotate, rewrap and retire every user's key: deleted and "
            "expired rows become unreadable in every copy of the database (run it from a timer)")


def _key_commands(command: Callable[..., argparse.ArgumentParser]) -> None:
    """keys rotate, rewrap, retire and shred."""
    command("rotate", commands.rotate, "make a new key version primary for --user").add_argument(
        "--user", required=True)
    command("rewrap", commands.rewrap, "re-wrap old rows under the primary key (--user, default all users)"
            ).add_argument("--user", default=None)
    command("retire", commands.retire, "remove key versions no row uses").add_argument("--user", required=True)
    shred = command("shred", commands.shred, "destroy --user's keys, then rows (irreversible)")
    shred.add_argument("--user", required=True)
    shred.add_argument("--yes", action="store_true", help="confirm: the user's data is destroyed for good")


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, run one subcommand, and turn any failure into one line on stderr and an exit code."""
    args = build_parser().parse_args(argv)
    quiet = logging.NullHandler()  # the library's and the driver's warnings: the error line says what happened
    for name in QUIET_LOGGERS:
        logging.getLogger(name).addHandler(quiet)
    audit = None
    try:
        audit = _audit_handler(args.audit_log)
        return args.handler(args)
    except VaultError as error:
        code = next(code for kind, code in EXIT_CODES if isinstance(error, kind))
        return _fail(args, type(error).__name__, str(error), code)
    except BrokenPipeError:  # stdout closed early (| head): stop quietly, as SIGPIPE would
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        return _fail(args, "Interrupted", "interrupted", EXIT_INTERRUPTED)
    except Exception as error:  # a bug: its message or traceback could hold content, so neither is shown
        return _fail(args, "InternalError", f"unexpected {type(error).__name__}; please report it", EXIT_INTERNAL)
    finally:
        for name in QUIET_LOGGERS:
            logging.getLogger(name).removeHandler(quiet)
        if audit is not None:
            _remove_audit_handler(audit)


def _fail(args: argparse.Namespace, kind: str, message: str, code: int) -> int:
    """One line on stderr: ``scratchvault: Kind: message``, or a JSON object with --json."""
    line = (json.dumps({"error": kind, "message": message, "exit_code": code}) if args.json
            else f"scratchvault: {kind}: {message}")
    print(line, file=sys.stderr)
    return code


class _AuditLines(logging.StreamHandler):
    """One audit record per line on a stream; a failed write is one warning line, then silence."""

    def __init__(self, stream: Any, owned: bool) -> None:
        super().__init__(stream)
        self.setFormatter(logging.Formatter("%(message)s"))
        self._owned = owned
        self._warned = False

    def handleError(self, record: logging.LogRecord) -> None:
        if not self._warned:
            self._warned = True
            print("scratchvault: warning: an audit record could not be written", file=sys.stderr)

    def close(self) -> None:
        if self._owned:
            self.stream.close()
        super().close()


def _audit_handler(target: str | None) -> _AuditLines | None:
    """Route ``scratchvault.audit`` to the audit file (created 0600, appended, never through a symlink or
    into a file others may write), or to stderr for ``-``. Opened before the command runs, so a command
    never runs unaudited when auditing was asked for."""
    if not target:
        return None
    if target == "-":
        handler = _AuditLines(sys.stderr, owned=False)
    else:
        try:
            # O_NONBLOCK: opening a FIFO must not hang; the fstat below refuses anything but a regular file
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
            fd = os.open(target, flags, 0o600)
        except OSError as error:
            raise UnsafeStorage(f"cannot open the audit log ({error.strerror or type(error).__name__})") from None
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
            os.close(fd)
            raise UnsafeStorage("the audit log must be a regular file of this account that others cannot write")
        os.set_blocking(fd, True)
        handler = _AuditLines(os.fdopen(fd, "a", encoding="utf-8"), owned=True)
    logger = logging.getLogger(AUDIT_LOGGER)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return handler


def _remove_audit_handler(handler: _AuditLines) -> None:
    logger = logging.getLogger(AUDIT_LOGGER)
    logger.removeHandler(handler)
    logger.setLevel(logging.NOTSET)
    logger.propagate = True
    handler.close()
