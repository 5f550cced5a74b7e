"""The ``scratchvault`` command (``python -m vault``): a thin layer that maps library errors to exit codes."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from vault.errors import IntegrityError, KeyUnavailable, NotFound, VaultError

EXIT_CODES = ((NotFound, 1), (KeyUnavailable, 3), (IntegrityError, 4))


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, run one subcommand, and turn a VaultError into one line on stderr and an exit code."""
    parser = argparse.ArgumentParser(prog="scratchvault", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="two users, slices, a refused cross-user read, expiry and gc")
    demo.add_argument("--db", type=Path, default=None, help="database path (default: a throwaway one)")
    doctor = commands.add_parser("doctor", help="is the keyring acceptable and the database private? (exit 1 if not)")
    doctor.add_argument("--db", type=Path, default=None, help="database path (default: the platform data path)")
    args = parser.parse_args(argv)
    try:
        if args.command == "doctor":
            from vault.doctor import diagnose

            lines, safe = diagnose(args.db)
            print("\n".join(lines))
            return 0 if safe else 1
        from vault import demo as demo_module

        return demo_module.run(args.db, sys.stdout)
    except VaultError as error:
        print(f"scratchvault: {type(error).__name__}: {error}", file=sys.stderr)
        return next((code for kind, code in EXIT_CODES if isinstance(error, kind)), 2)
