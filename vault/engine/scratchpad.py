"""Engine integration: the offload decision, the model's view, and a ``scratchpad_read`` tool only the owner can use.

An agent engine calls :meth:`Scratchpad.observe` after every tool step and puts what it returns into the
model's context; it offers :meth:`Scratchpad.tools` to the model before every call and hands the model's
``scratchpad_read`` calls to :meth:`Scratchpad.call_tool` together with the principal and turn *it* knows (the
model's arguments never choose whose data is read). ``${stepN.field}`` references keep resolving to full values
through :meth:`Scratchpad.resolve`. Framework-neutral: plain dicts and lists in, plain dicts and lists out.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable, Mapping
from typing import Any, TypedDict, Unpack

from vault.engine.tool import tool_declaration
from vault.engine.tool_args import ReadRequest, parse_arguments
from vault.errors import InvalidArgument, NotFound, VaultError
from vault.inputs import check_identifier, check_int, check_keywords, check_step, check_ttl
from vault.model import Principal, check_principal, representation
from vault.row.chunks import classify
from vault.row.json_values import check_json_value
from vault.row.slices import plan
from vault.vault import Vault

log = logging.getLogger("scratchvault.engine")
DEFAULT_THRESHOLD_BYTES = 4096
NOT_FOUND: dict[str, str] = {"error": "not found: no observation with this id is readable here"}
FAULT: dict[str, str] = {"error": "the scratchpad could not read this observation now; continue without it"}
# What the frameworks' offloading wrappers answer in place of a tool result the vault could not keep: no content
STORE_FAILED: dict[str, str] = {"error": "this tool's result could not be kept for reading; continue without it"}
COUNTERS = ("offloaded_observations", "offloaded_bytes", "inline_observations", "tool_reads", "denied_reads",
            "tool_errors")
# The keys of an offloaded observation's context: how full_value tells a reference from an inline value.
OFFLOADED_KEYS = frozenset(representation(bytes(16), 0, 1.0, (0, "x", "text", 0, 0.0, "", {})).to_dict())
_REFERENCE = re.compile(r"\$\{step([0-9]{1,16})((?:\.[^.{}]+)*)\}")  # ASCII digits: int() takes what it matches
_INDEX = re.compile(r"[0-9]{1,16}")

MetricsHook = Callable[[str, int], None]


class PadOptions(TypedDict, total=False):
    """The keyword settings of a :class:`Scratchpad` (see its ``__init__``)."""

    max_read: int | None
    allow_other_turns: bool
    ttl_seconds: float
    metrics: MetricsHook | None
    refresh_on_read: bool


class Scratchpad:
    """The engine's side of the vault for every principal and turn; thread-safe; counters are per process."""

    def __init__(self, vault: Vault, threshold_bytes: int = DEFAULT_THRESHOLD_BYTES,
                 **options: Unpack[PadOptions]) -> None:
        """Keywords: ``max_read``, ``allow_other_turns`` (default False), ``ttl_seconds`` (3600), ``metrics``,
        ``refresh_on_read`` (False). ``threshold_bytes`` is the one canonical offload setting; ``max_read`` (at
        most the vault's) caps each tool read; ``metrics(name, increment)`` is called for every counter change,
        never with content; ``refresh_on_read`` makes each successful tool read give its row ``ttl_seconds``
        more from the read (never shortening it; ``ttl_seconds`` is at most the vault's maximum lifetime)."""
        check_keywords("Scratchpad", options, PadOptions.__optional_keys__)
        max_read, metrics = options.get("max_read"), options.get("metrics")
        allow_other_turns = options.get("allow_other_turns", False)
        refresh_on_read = options.get("refresh_on_read", False)
        ttl_seconds = options.get("ttl_seconds", 3600.0)
        if not isinstance(vault, Vault):
            raise InvalidArgument("vault must be a Vault")
        self._vault = vault
        self.threshold_bytes = check_int(threshold_bytes, "threshold_bytes", 1, 2**53 - 1)
        self._max_read = None if max_read is None else check_int(max_read, "max_read", 1, vault.max_read)
        if not isinstance(allow_other_turns, bool):
            raise InvalidArgument("allow_other_turns must be a bool")
        self.allow_other_turns = allow_other_turns
        if not isinstance(refresh_on_read, bool):
            raise InvalidArgument("refresh_on_read must be a bool")
        self.refresh_on_read = refresh_on_read
        self.ttl_seconds = check_ttl(ttl_seconds, vault.max_ttl_seconds)
        if metrics is not None and not callable(metrics):
            raise InvalidArgument("metrics must be a callable taking (name, increment)")
        self._metrics = metrics
        self._lock = threading.Lock()
        self._counters = dict.fromkeys(COUNTERS, 0)

    @property
    def max_read(self) -> int:
        """The cap of one tool read, in the row's units: this pad's setting, never more than the vault's."""
        return self._vault.max_read if self._max_read is None else min(self._max_read, self._vault.max_read)

    # -- after every tool step -------------------------------------------------------------------------
    def observe(self, principal: Principal, turn_id: str, step_num: int, executor_name: str, observation: Any, *,
                ttl_seconds: float | None = None) -> Any:
        """What goes into the model's context: the observation itself when it serialises to fewer than
        ``threshold_bytes``, otherwise (after ``put``) its representation's dict. Streams are always stored."""
        _check_call(principal, turn_id)
        check_step(step_num)
        check_identifier(executor_name, "executor_name")
        size = serialised_size(observation, self.threshold_bytes)
        # a small dict shaped like a representation is stored too, so full_value can never mistake it for one
        if size is not None and size < self.threshold_bytes and offloaded_id(observation) is None:
            self._count("inline_observations")
            return observation
        ttl = self.ttl_seconds if ttl_seconds is None else ttl_seconds
        rep = self._vault.put(principal, turn_id, step_num, executor_name, observation, ttl_seconds=ttl)
        self._count("offloaded_observations")
        self._count("offloaded_bytes", rep.size_bytes)
        return rep.to_dict()

    def full_value(self, principal: Principal, turn_id: str, observed: Any) -> Any:
        """The original observation behind what ``observe`` returned (fetched from the vault when it was
        offloaded): str, bytes, or the JSON value. NotFound when the row is gone, expired or not this turn's."""
        _check_call(principal, turn_id)
        row_id = offloaded_id(observed)
        if row_id is None:
            return observed
        return self._vault.get(principal, row_id, turn_id=self._turn_scope(turn_id)).content

    def resolve(self, principal: Principal, turn_id: str, steps: Mapping[int, Any], reference: str) -> Any:
        """Resolve ``${stepN}`` or ``${stepN.field.0.sub}`` against the turn's step results (as ``observe``
        returned them) to the full value; InvalidArgument when the reference does not resolve."""
        match = _REFERENCE.fullmatch(reference) if isinstance(reference, str) else None
        if match is None:
            raise InvalidArgument("a reference must look like ${stepN} or ${stepN.field}")
        step = int(match.group(1))
        if step not in steps:
            raise InvalidArgument(f"reference to step {step}, which has no result in this turn")
        value = self.full_value(principal, turn_id, steps[step])
        for part in match.group(2).split(".")[1:]:
            value = _child(value, part, step)
        return value

    # -- before every model call -----------------------------------------------------------------------
    def tools(self, principal: Principal, turn_id: str, shape: str = "neutral", *,
              strict: bool = False) -> list[dict[str, Any]]:
        """``[scratchpad_read declaration]`` (see ``tool_declaration``) when the principal has readable rows in
        this turn, else ``[]``. An index lookup: nothing is decrypted. A vault fault is logged and offers
        nothing, as ``call_tool`` answers one, so it cannot end a turn; a bad principal still raises."""
        _check_call(principal, turn_id)
        declaration = tool_declaration(shape, strict=strict)
        try:
            readable = self._vault.has_rows(principal, turn_id)
        except VaultError as error:  # StorageError on a closed vault or a broken store: logged, never shown
            log.warning("scratchpad tools failed: %s", type(error).__name__)
            return []
        return [declaration] if readable else []

    def resume(self, principal: Principal, turn_id: str, *, ttl_seconds: float | None = None) -> list[dict[str, Any]]:
        """Resume a suspended turn (in any process): extend its live rows' lifetime and return their contexts."""
        _check_call(principal, turn_id)
        self._vault.extend_turn(principal, turn_id, self.ttl_seconds if ttl_seconds is None else ttl_seconds)
        return [rep.to_dict() for rep in self._vault.list_for_turn(principal, turn_id)]

    # -- the model's tool call -------------------------------------------------------------------------
    def call_tool(self, principal: Principal, turn_id: str, arguments: Any) -> dict[str, Any]:
        """Run a ``scratchpad_read`` call for ``principal`` (from the runtime, never from ``arguments``). Always
        a JSON-serialisable dict: the slice and its sizes, or ``{"error": ...}``; never raises for the model's
        arguments or a vault fault. Another user's, another turn's, expired, malformed and absent ids all get
        the same NOT_FOUND."""
        _check_call(principal, turn_id)  # a bad principal is the runtime's bug, not the model's: raise
        try:
            request = parse_arguments(arguments)
        except InvalidArgument as error:
            self._count("tool_errors")
            return {"error": f"invalid arguments: {error}"}
        try:
            result = self._read(principal, request, self._turn_scope(turn_id))
        except NotFound:
            self._count("denied_reads")
            log.info("scratchpad_read: not found or not readable by this principal in this turn")
            return dict(NOT_FOUND)
        except InvalidArgument as error:
            self._count("tool_errors")
            return {"error": f"invalid arguments: {error}"}
        except VaultError as error:  # IntegrityError, KeyUnavailable, StorageError: logged, never shown
            self._count("tool_errors")
            log.warning("scratchpad_read failed: %s", type(error).__name__)
            return dict(FAULT)
        self._count("tool_reads")
        if self.refresh_on_read:
            self._refresh(principal, request.id)
        return result

    def _refresh(self, principal: Principal, row_id: str) -> None:
        """Give a row just read ``ttl_seconds`` more; a fault is logged, and the read's answer stands."""
        try:
            self._vault.extend(principal, row_id, self.ttl_seconds)
        except VaultError as error:  # NotFound too: the row expired or was deleted since the read
            log.warning("scratchpad_read: the row read was not refreshed: %s", type(error).__name__)

    def _read(self, principal: Principal, request: ReadRequest, turn_id: str | None) -> dict[str, Any]:
        """Read the slice under this pad's cap, asking the vault only for what the cap lets through; the
        vault checks owner, turn and expiry before it decrypts anything."""
        cap, mode, n, start, end = self.max_read, request.mode, request.n, request.start, request.end
        if request.find is not None:
            found = self._vault.find(principal, request.id, request.find.query, n=request.find.n,
                                     ignore_case=request.find.ignore_case, turn_id=turn_id)
            return found.to_dict()
        if mode in ("head", "tail"):
            result = self._vault.read(principal, request.id, mode=mode, n=min(n, cap), turn_id=turn_id)
        else:
            first = start or 0
            last = first + cap if end is None or mode == "full" else min(end, first + cap)
            result = self._vault.read(principal, request.id, mode="range", start=first, end=last, turn_id=turn_id)
        wanted = plan(mode, n, start, end, result.full_size, cap)
        truncated = wanted.truncated or result.truncated
        reply = {**result.to_dict(), "mode": mode, "truncated": truncated}
        if truncated:
            reply["hint"] = (f"capped at {cap} {reply['unit']}; read further with mode 'range' and "
                             f"start/end (e.g. start={result.end})" if mode != "tail" else
                             f"capped at {cap} {reply['unit']}; read earlier parts with mode 'range'")
        return reply

    # -- observability ---------------------------------------------------------------------------------
    def stats(self) -> dict[str, int]:
        """This process's counters: observations and bytes offloaded, inline observations, tool reads, denied
        reads and tool errors. Counts only; never content, ids or names."""
        with self._lock:
            return dict(self._counters)

    def _count(self, name: str, increment: int = 1) -> None:
        with self._lock:
            self._counters[name] += increment
        if self._metrics is not None:
            try:
                self._metrics(name, increment)
            except Exception:  # a broken metrics sink must not break a turn
                log.warning("scratchvault metrics hook failed for %s", name)

    def _turn_scope(self, turn_id: str) -> str | None:
        """The turn a read must belong to: the current one, unless this pad allows other turns."""
        return None if self.allow_other_turns else turn_id


def serialised_size(observation: Any, threshold: int) -> int | None:
    """Bytes the observation takes serialised (UTF-8 for str; the buffer for bytes-likes; compact UTF-8 JSON
    for dict, list and JSON scalars), counted only until ``threshold`` is reached; None for a stream."""
    if isinstance(observation, str):
        if len(observation) >= threshold:  # UTF-8 never takes fewer bytes than characters
            return len(observation)
        return len(observation.encode("utf-8", "surrogatepass"))  # a lone surrogate is stored as 3 bytes too
    if isinstance(observation, bytes | bytearray):
        return len(observation)
    if isinstance(observation, memoryview):
        try:
            return observation.nbytes
        except ValueError:
            raise InvalidArgument("observation is a released memoryview") from None
    if observation is None or isinstance(observation, bool | int | float | dict | list):
        return _json_size(observation, threshold)
    classify(observation)  # InvalidArgument for anything the vault cannot store
    return None


def _json_size(value: Any, threshold: int) -> int:
    """Compact JSON size, encoded piece by piece so a huge structure stops costing at the threshold."""
    encoder = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    size = 0
    try:
        for piece in encoder.iterencode(value):
            size += len(piece.encode("utf-8", "surrogatepass"))
            if size >= threshold:
                break
    except (TypeError, ValueError, RecursionError):  # not JSON, NaN, circular, an over-long int
        raise InvalidArgument("observation holds a value that cannot be written as JSON") from None
    if not isinstance(value, dict | list):
        if size >= threshold:
            raise InvalidArgument("a scalar observation this large cannot be stored; wrap it in a list")
    elif size < threshold:
        check_json_value(value)  # what json.dumps would quietly coerce (int keys) the vault refuses too
    return size


def offloaded_id(observed: Any) -> str | None:
    """The row id when ``observed`` is an offloaded observation's context (a representation dict), else None."""
    if isinstance(observed, dict) and observed.keys() == OFFLOADED_KEYS and isinstance(observed["id"], str):
        return observed["id"]
    return None


def _child(value: Any, part: str, step: int) -> Any:
    """One step down a reference path: a key of an object, or an index of an array."""
    if isinstance(value, dict) and part in value:
        return value[part]
    if isinstance(value, list) and _INDEX.fullmatch(part) and int(part) < len(value):
        return value[int(part)]
    raise InvalidArgument(f"the result of step {step} has no field {part[:40]!r}")


def _check_call(principal: object, turn_id: object) -> None:
    check_principal(principal)
    check_identifier(turn_id, "turn_id")
