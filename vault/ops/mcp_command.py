"""``scratchvault mcp``: serve ``scratchpad_read`` over MCP on stdin/stdout for one principal and turn.

The host that launches the server fixes whose rows it reads: ``--user``/``--turn`` (and the optional
``--actor``/``--channel``), each falling back to ``$SCRATCHVAULT_USER``, ``$SCRATCHVAULT_TURN``,
``$SCRATCHVAULT_ACTOR``, ``$SCRATCHVAULT_CHANNEL`` when its flag is absent (a flag wins over its variable).
Nothing the model sends can change them. The MCP SDK is imported only when the command runs, so the rest of
the CLI works without the ``mcp`` extra; without it this command says to install ``scratchvault[mcp]``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable

from vault.errors import InvalidArgument, VaultError
from vault.inputs import check_identifier
from vault.model import Principal
from vault.ops import commands

ENVIRONMENT = {"user": "SCRATCHVAULT_USER", "turn": "SCRATCHVAULT_TURN", "actor": "SCRATCHVAULT_ACTOR",
               "channel": "SCRATCHVAULT_CHANNEL"}
HELP = ("serve scratchpad_read over MCP on stdin/stdout for one user and turn (flags, else $SCRATCHVAULT_USER, "
        "$SCRATCHVAULT_TURN, ...); needs scratchvault[mcp]")
_SDK_MODULES = frozenset({"mcp", "mcp_types", "anyio", "pydantic", "starlette"})


def add_command(command: Callable[..., argparse.ArgumentParser]) -> None:
    """The ``mcp`` subcommand and its options (the principal's flags are optional: the environment may give them)."""
    parser = command("mcp", serve, HELP)
    for name, variable in ENVIRONMENT.items():
        parser.add_argument(f"--{name}", default=None, help=f"default ${variable}")
    parser.add_argument("--max-read", type=int, default=16000, help="cap on units one read returns (default 16000)")


def bound_principal(args: argparse.Namespace) -> tuple[Principal, str]:
    """The principal and turn the server is bound to: each flag, else its environment variable. A flag given empty
    is refused (by the checks below), never replaced by its variable: the host's command line decides."""
    given = {name: os.environ.get(variable) or None if getattr(args, name) is None else getattr(args, name)
             for name, variable in ENVIRONMENT.items()}
    missing = [f"--{name} (or ${ENVIRONMENT[name]})" for name in ("user", "turn") if given[name] is None]
    user, turn = given["user"], given["turn"]
    if missing or user is None or turn is None:
        raise InvalidArgument(f"the MCP server needs {' and '.join(missing)}")
    principal = Principal(user, actor=given["actor"], channel=given["channel"])
    return principal, check_identifier(turn, "turn_id")


def serve(args: argparse.Namespace) -> int:
    """Open the vault (the same database and keyring as the engine), then serve until stdin closes."""
    principal, turn_id = bound_principal(args)
    try:
        import anyio

        from vault.integrations.mcp import serve_stdio
    except ImportError as error:
        if (error.name or "").split(".")[0] not in _SDK_MODULES:
            raise
        raise VaultError("the MCP server needs the MCP SDK: pip install 'scratchvault[mcp]'") from None
    from vault.engine import Scratchpad

    with commands.open_vault(args, max_read=args.max_read) as vault, _stderr_log():
        anyio.run(serve_stdio, Scratchpad(vault), principal, turn_id)
    return 0


class _stderr_log:
    """While serving: the library's warnings (kinds of faults, never content) as lines on stderr; the SDK's
    own log records (which may echo a request's body) go nowhere. stdout is the protocol's alone."""

    def __enter__(self) -> None:
        self._lines = logging.StreamHandler(sys.stderr)
        self._lines.setLevel(logging.WARNING)
        self._lines.setFormatter(logging.Formatter("scratchvault mcp: %(levelname)s: %(message)s"))
        self._quiet = logging.NullHandler()
        logging.getLogger("scratchvault").addHandler(self._lines)
        logging.getLogger("mcp").addHandler(self._quiet)

    def __exit__(self, *exc_info: object) -> None:
        logging.getLogger("scratchvault").removeHandler(self._lines)
        logging.getLogger("mcp").removeHandler(self._quiet)
