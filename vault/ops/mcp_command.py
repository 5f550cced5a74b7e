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
import secrets
import sys
from collections.abc import Callable

from vault.errors import InvalidArgument, KeyUnavailable, VaultError
from vault.inputs import check_identifier
from vault.model import Principal
from vault.ops import commands

ENVIRONMENT = {"user": "SCRATCHVAULT_USER", "turn": "SCRATCHVAULT_TURN", "actor": "SCRATCHVAULT_ACTOR",
               "channel": "SCRATCHVAULT_CHANNEL"}
HELP = ("serve scratchpad_read over MCP on stdin/stdout for one user and turn (flags, else $SCRATCHVAULT_USER, "
        "$SCRATCHVAULT_TURN, ...); needs scratchvault[mcp]")
_SDK_MODULES = frozenset({"mcp", "mcp_types", "anyio", "pydantic", "starlette"})
log = logging.getLogger("scratchvault.mcp")


def add_command(command: Callable[..., argparse.ArgumentParser]) -> None:
    """The ``mcp`` subcommand and its options (the principal's flags are optional: the environment may give them)."""
    parser = command("mcp", serve, HELP)
    for name, variable in ENVIRONMENT.items():
        parser.add_argument(f"--{name}", default=None, help=f"default ${variable}")
    parser.add_argument("--max-read", type=int, default=16000, help="cap on units one read returns (default 16000)")
    parser.add_argument("--ttl", type=float, default=3600.0, help="with --wrap: seconds a stored result lives "
                        "(default 3600)")
    parser.add_argument("--threshold-bytes", type=int, default=4096, help="with --wrap: results this large or "
                        "larger are stored (default 4096)")
    parser.add_argument("--wrap", action="store_true", help="proxy the MCP server the command after -- starts "
                        "(stdio): its large tool results are stored, scratchpad_read is added; --turn defaults "
                        "to one of its own per proxy session")
    parser.add_argument("upstream", nargs="*", metavar="COMMAND", help="with --wrap, after --: the upstream "
                        "MCP server's command and its arguments")


def bound_principal(args: argparse.Namespace, *, turn_default: str | None = None) -> tuple[Principal, str]:
    """The principal and turn the server is bound to: each flag, else its environment variable, else (the turn
    only) ``turn_default``. A flag given empty is refused (by the checks below), never replaced by its variable:
    the host's command line decides."""
    given = {name: os.environ.get(variable) or None if getattr(args, name) is None else getattr(args, name)
             for name, variable in ENVIRONMENT.items()}
    given["turn"] = turn_default if given["turn"] is None else given["turn"]
    missing = [f"--{name} (or ${ENVIRONMENT[name]})" for name in ("user", "turn") if given[name] is None]
    user, turn = given["user"], given["turn"]
    if missing or user is None or turn is None:
        raise InvalidArgument(f"the MCP server needs {' and '.join(missing)}")
    principal = Principal(user, actor=given["actor"], channel=given["channel"])
    return principal, check_identifier(turn, "turn_id")


# What a host launching the server usually lacks: it passes only a few variables (the MCP SDK's stdio client:
# HOME, LOGNAME, PATH, SHELL, TERM, USER), so the session bus, and with it the keyring, is out of reach.
HOST_REMEDY = ("an MCP host starts its servers with a minimal environment: give this server the session bus in "
               "its configuration's env (DBUS_SESSION_BUS_ADDRESS, e.g. unix:path=/run/user/<uid>/bus), or run it "
               "under its own D-Bus session with the keyring unlocked; see the README, \"MCP\"")


def serve(args: argparse.Namespace) -> int:
    """Open the vault (the same database and keyring as the engine), then serve until stdin closes. A vault that
    cannot be opened is served too, as an error in every answer, so the host shows why instead of a closed pipe."""
    if args.wrap:
        return _wrap(args)
    if args.upstream:
        raise InvalidArgument("a command after -- is the upstream of --wrap, which is missing")
    principal, turn_id = bound_principal(args)
    try:
        import anyio

        from vault.integrations.mcp import serve_server_stdio, serve_stdio, unavailable_server
    except ImportError as error:
        if (error.name or "").split(".")[0] not in _SDK_MODULES:
            raise
        raise VaultError("the MCP server needs the MCP SDK: install scratchvault with its mcp extra "
                         "(pip install '<clone or wheel>[mcp]')") from None
    from vault.engine import Scratchpad

    with _stderr_log():
        try:
            vault = commands.open_vault(args, max_read=args.max_read)
        except VaultError as error:
            cause = _unavailable(error)
            log.error("%s", cause)
            anyio.run(serve_server_stdio, unavailable_server(cause))
            return 0
        with vault:
            anyio.run(serve_stdio, Scratchpad(vault), principal, turn_id)
    return 0


def _wrap(args: argparse.Namespace) -> int:
    """``--wrap -- COMMAND``: the proxy in front of COMMAND's MCP server, on the vault (made by the first result
    stored), for the bound user and turn (a turn of this session's own unless given)."""
    command = list(args.upstream)
    if not command:
        raise InvalidArgument("--wrap needs the upstream server's command, e.g. --wrap -- python server.py")
    principal, turn_id = bound_principal(args, turn_default=f"mcp-proxy-{secrets.token_hex(8)}")
    try:
        import anyio

        from vault.integrations.mcp import serve_server_stdio, unavailable_server
        from vault.integrations.mcp_proxy import Binding, serve_proxy
    except ImportError as error:
        if (error.name or "").split(".")[0] not in _SDK_MODULES:
            raise
        raise VaultError("the MCP proxy needs the MCP SDK: install scratchvault with its mcp extra "
                         "(pip install '<clone or wheel>[mcp]')") from None
    from vault.engine import Scratchpad

    with _stderr_log():
        try:
            vault = commands.open_vault(args, create=True, max_read=args.max_read)
            pad = Scratchpad(vault, args.threshold_bytes, ttl_seconds=args.ttl)
        except VaultError as error:
            log.error("%s", _unavailable(error))
            anyio.run(serve_server_stdio, unavailable_server(_unavailable(error)))
            return 0
        with vault:
            anyio.run(serve_proxy, pad, command, Binding(principal, turn_id))
    return 0


def _unavailable(error: VaultError) -> str:
    """What every answer of a server without its vault says: the error (kind, message, remedy; never content or
    a key), and for a keyring out of reach, what a host's configuration needs."""
    cause = f"scratchvault could not open its vault: {type(error).__name__}: {error}"
    return f"{cause}; {HOST_REMEDY}" if isinstance(error, KeyUnavailable) else cause


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
