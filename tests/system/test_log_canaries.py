"""No log record and no warning holds content, a summary, an owner's identity in clear, a turn or executor name,
a token or a key: every public operation runs (the Vault, the engine's Scratchpad and its tool, the MCP server
through the SDK's client, the ``scratchvault`` command in-process, failures included) with every logger enabled at
DEBUG and every record captured, whichever handlers and levels the code sets up, and each record's message,
arguments, extras and exception are searched."""

from __future__ import annotations

import base64
import io
import logging
import traceback
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import keyring
import keyring.core
import pytest
from mcp import Client, MCPError

from keys.testing import MemoryKeyring
from tests.support.clock import FakeClock
from tests.support.key_traces import KeyRecorder, key_texts
from vault import NotFound, Principal, Vault
from vault.engine import Scratchpad
from vault.integrations.mcp import build_server, fixed_principal
from vault.ops import cli

USER, ACTOR, CHANNEL = "CANARY-USER-u7", "CANARY-ACTOR-a3", "CANARY-CHANNEL-c5"
TURN, EXECUTOR, CONTENT = "CANARY-TURN-t9", "CANARY-EXEC-e2", "CANARY-CONTENT-k4 "
TOKEN = "CANARY-TOKEN-b8"  # what a principal hook fails on (a bearer token it could not map)
OWNER = Principal(USER, actor=ACTOR, channel=CHANNEL)
NAMES = (USER, ACTOR, CHANNEL, TURN, EXECUTOR, CONTENT, TOKEN)


def canaries() -> set[str]:
    """The canaries in clear, in either case, and as hex and Base64 of their bytes."""
    found = {"CANARY", "canary"}
    for name in NAMES:
        raw = name.encode()
        found |= {raw.hex(), base64.b64encode(raw).decode()[:16], base64.urlsafe_b64encode(raw).decode()[:16]}
    return found


class Captured:
    """Every record any logger handles, and every warning."""

    def __init__(self) -> None:
        self.records: list[logging.LogRecord] = []
        self.warnings: list[warnings.WarningMessage] = []

    def texts(self) -> Iterator[str]:
        for record in self.records:
            yield f"{record.name}: {record.getMessage()} {record.args!r} {record.stack_info or ''}"
            yield " ".join(repr(value) for value in vars(record).values())
            if record.exc_info and record.exc_info[1] is not None:
                yield "".join(traceback.format_exception(record.exc_info[1]))
        for caught in self.warnings:
            yield f"{caught.category.__name__}: {caught.message}"


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> Iterator[Captured]:
    """Every logger enabled at every level (DEBUG included, whatever levels the code or its callers set), each
    record kept before any handler, filter or propagation rule sees it; warnings recorded, all of them."""
    found = Captured()
    call_handlers = logging.Logger.callHandlers

    def keep(logger: logging.Logger, record: logging.LogRecord) -> None:
        found.records.append(record)
        call_handlers(logger, record)

    monkeypatch.setattr(logging.Logger, "isEnabledFor", lambda logger, level: True)
    monkeypatch.setattr(logging.Logger, "callHandlers", keep)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield found
        found.warnings = list(caught)


def vault_operations(vault: Vault, clock: FakeClock) -> None:
    """Every public operation of the Vault, and the failures a caller or an attacker can provoke."""
    row = vault.put(OWNER, TURN, 1, EXECUTOR, CONTENT * 4000).id
    streamed = vault.put(OWNER, TURN, 2, EXECUTOR, io.BytesIO((CONTENT * 100).encode())).id
    vault.put(OWNER, TURN, 3, EXECUTOR, {"CANARY-KEY-k4": [CONTENT]}, ttl_seconds=60)
    vault.get(OWNER, row)
    vault.read(OWNER, row, "range", start=70000, end=80000)
    vault.list_for_turn(OWNER, TURN)
    vault.has_rows(OWNER, TURN)
    vault.audit_tags(user_id=USER, actor=ACTOR, channel=CHANNEL, turn_id=TURN)
    for denied in (lambda: vault.read(Principal("mallory"), row), lambda: vault.get(OWNER, row, turn_id="other"),
                   lambda: vault.read(OWNER, "CANARY-u7-made-up-id")):
        with pytest.raises(NotFound):
            denied()
    vault.extend_turn(OWNER, TURN, 7200)
    vault.delete(OWNER, streamed)
    vault.rotate_owner_key(USER)
    vault.rewrap(USER)
    vault.retire_old_key_versions(USER)
    vault.maintain_keys()
    vault.stats()
    clock.advance(8000)
    vault.gc()
    vault.shred_owner(USER)


def engine_operations(vault: Vault) -> None:
    pad = Scratchpad(vault, threshold_bytes=64)
    seen = pad.observe(OWNER, TURN, 4, EXECUTOR, CONTENT * 50)
    pad.tools(OWNER, TURN)
    pad.call_tool(OWNER, TURN, {"id": seen["id"], "mode": "head", "n": 100})
    pad.call_tool(OWNER, TURN, {"id": "CANARY-u7", "mode": "head"})
    pad.call_tool(OWNER, TURN, {"CANARY-k4": CONTENT})
    pad.resume(OWNER, TURN)


def mcp_operations(pad: Scratchpad, row: str) -> None:
    """The MCP server in process, through the SDK's client: listing, reads, a made-up id, a refused principal."""
    async def scenario(client: Client) -> None:
        await client.list_tools()
        await client.call_tool("scratchpad_read", {"id": row, "mode": "head", "n": 50})
        await client.call_tool("scratchpad_read", {"id": "CANARY-u7"})

    async def refused(client: Client) -> None:
        with pytest.raises(MCPError):
            await client.list_tools()

    async def refusing(_context: object) -> Principal:
        raise KeyError(TOKEN)

    for principal_for, calls in ((fixed_principal(OWNER, TURN), scenario), (refusing, refused)):
        async def main(principal_for: Any = principal_for, calls: Any = calls) -> None:
            async with Client(build_server(pad, principal_for)) as client:
                await calls(client)

        anyio.run(main)


def command_operations(db: Path, source: Path) -> None:
    who = ("--user", USER, "--actor", ACTOR, "--channel", CHANNEL, "--db", str(db), "--audit-log", "-")
    assert cli.main(["put", str(source), "--turn", TURN, "--executor", EXECUTOR, *who]) == 0
    for args in (["list", "--turn", TURN, *who], ["read", "CANARY-u7", *who], ["stats", "--db", str(db)],
                 ["gc", "--db", str(db)], ["keys", "rotate", "--user", USER, "--db", str(db)],
                 ["keys", "shred", "--user", USER, "--yes", "--db", str(db)]):
        cli.main(args)


def test_no_log_record_or_warning_holds_content_identity_or_keys(
        captured: Captured, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    recorder = KeyRecorder().install(monkeypatch)
    clock, ring = FakeClock(), MemoryKeyring()
    with Vault.open(tmp_path / "v.db", keyring_backend=ring, clock=clock) as vault:
        recorder.add_keyring(ring)
        engine_operations(vault)
        pad = Scratchpad(vault, threshold_bytes=64)
        mcp_operations(pad, pad.observe(OWNER, TURN, 5, EXECUTOR, CONTENT * 50)["id"])
        vault_operations(vault, clock)
    source = tmp_path / "observation.txt"
    source.write_text(CONTENT * 300)
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "tests.support.file_keyring.FileKeyring")
    monkeypatch.setenv("SCRATCHVAULT_TEST_KEYRING", str(tmp_path / "keyring.json"))
    monkeypatch.setattr(keyring.core, "_keyring_backend", None)  # chosen again from the environment just set
    command_operations(tmp_path / "cli.db", source)
    assert {"scratchvault", "scratchvault.audit", "scratchvault.mcp"} <= {record.name for record in captured.records}
    secrets = [text for key in recorder.keys for text in key_texts(key)]
    found = [text for text in captured.texts() if any(word in text for word in (*canaries(), *secrets))]
    assert found == []
