"""The audit trail: one JSON record per vault operation, through ``logging`` (logger ``scratchvault.audit``).

A record says when, which operation, on which row, with what outcome, and who asked, as keyed tags::

    {"time": "2030-01-01T12:00:00.123Z", "op": "read", "outcome": "ok", "vault": "<vault id>", "pid": 4242,
     "row": "<row id>", "user": "<tag>", "actor": "<tag>", "channel": "<tag>", "turn": "<tag>",
     "mode": "head", "returned": 2000, "truncated": false}

Tags are HMAC-SHA256 (16 bytes, hex) under a key derived from the vault's index key (``IndexKey.audit_tag``):
stable per identifier, so one user's actions can be followed (``Vault.audit_tags`` or ``scratchvault
audit-tag`` gives an identifier's tag), and meaningless without the keyring. A record never holds content,
summaries, plaintext identifiers, ids the caller made up, or error messages.

``outcome`` is what the caller saw: ``ok``, ``not_found``, ``integrity``, ``key_unavailable``, ``invalid``
or ``error`` (any other failure). ``"denied": true`` marks a not_found for a live row of another owner or
another turn, which the caller is never told apart from a missing row; only the operator's log says it.

Records are built only when the logger is enabled for INFO (a deployment turns it on, see README,
"Operations"), and building or emitting one never raises into the operation.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import logging
import os
from collections.abc import Callable
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, TypeVar

from keys import IndexKey, KeyManager
from vault.errors import IntegrityError, InvalidArgument, KeyUnavailable, NotFound, VaultError
from vault.inputs import check_optional_identifier, parse_row_id
from vault.model import Principal

AUDIT_LOGGER = "scratchvault.audit"
audit_log = logging.getLogger(AUDIT_LOGGER)
OUTCOMES = ((NotFound, "not_found"), (IntegrityError, "integrity"), (KeyUnavailable, "key_unavailable"),
            (InvalidArgument, "invalid"))
F = TypeVar("F", bound=Callable[..., Any])

# What a successful call's result adds to its record: counts, kinds and sizes, never content.
_RESULT_FIELDS: dict[str, Callable[[Any], dict[str, Any]]] = {
    "put": lambda rep: {"row": rep.id, "kind": rep.content_kind, "bytes": rep.size_bytes},
    "get": lambda record: {"kind": record.content_kind, "bytes": record.size_bytes},
    "read": lambda result: {"mode": result.mode, "returned": result.returned_size, "truncated": result.truncated},
    "list": lambda reps: {"rows": len(reps)},
    "find": lambda result: {"matches": len(result.matches), "more": result.more},
    "extend_turn": lambda count: {"rows": count},
    "gc": lambda count: {"rows": count},
    "rotate": lambda version: {"key_version": version},
    "rewrap": lambda count: {"rows": count},
    "retire": lambda count: {"versions": count},
    "shred": lambda count: {"rows": count},
}
_CALL: ContextVar[dict[str, Any] | None] = ContextVar("scratchvault_audit_call", default=None)


def outcome_of(error: BaseException) -> str:
    """The audit outcome of an exception that ended an operation."""
    return next((name for kind, name in OUTCOMES if isinstance(error, kind)), "error")


def recording() -> bool:
    """Whether a record of the audited call in progress on this thread is being built (the trail is on)."""
    return _CALL.get() is not None


def note(**details: bool | int | str) -> None:
    """Add details to the record of the audited call in progress on this thread (nothing outside one)."""
    call = _CALL.get()
    if call is not None:
        call.update(details)


def audited(operation: str) -> Callable[[F], F]:
    """Decorate a method of an object whose ``_audit`` is an :class:`AuditTrail`: each call emits one record,
    ``ok`` or the outcome of the error it raised (re-raised unchanged). The principal, ``user_id``, ``turn_id``
    and ``id`` come from the call's arguments, counts from its result."""

    def decorate(method: F) -> F:
        signature = inspect.signature(method)

        @functools.wraps(method)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            if not audit_log.isEnabledFor(logging.INFO):
                return method(self, *args, **kwargs)
            details: dict[str, Any] = {}
            token = _CALL.set(details)
            outcome, result = "error", None
            try:
                result = method(self, *args, **kwargs)
                outcome = "ok"
                return result
            except BaseException as error:
                outcome = outcome_of(error)
                raise
            finally:
                _CALL.reset(token)
                self._audit.record(operation, outcome, _arguments(signature, self, args, kwargs), result, details)

        return wrapper  # type: ignore[return-value]

    return decorate


def _arguments(signature: inspect.Signature, owner: object, args: tuple, kwargs: dict[str, Any]) -> dict[str, Any]:
    """A call's arguments by parameter name ({} for a call that does not fit the signature)."""
    try:
        return signature.bind_partial(owner, *args, **kwargs).arguments
    except TypeError:
        return {}


class AuditTrail:
    """Builds and emits a vault's audit records, and tells an auditor which tag is whose."""

    def __init__(self, keys: KeyManager) -> None:
        self._keys = keys

    def tags(self, *, user_id: str | None = None, actor: str | None = None, channel: str | None = None,
             turn_id: str | None = None) -> dict[str, str]:
        """The tags these identifiers carry in this vault's audit records (keys user, actor, channel, turn),
        so an auditor holding the keyring can find one user's records; only the identifiers given."""
        names = {"user": check_optional_identifier(user_id, "user_id"),
                 "actor": check_optional_identifier(actor, "actor"),
                 "channel": check_optional_identifier(channel, "channel"),
                 "turn": check_optional_identifier(turn_id, "turn_id")}
        index = self._keys.index_key()
        return {kind: index.audit_tag(kind, value) for kind, value in names.items() if value is not None}

    def record(self, operation: str, outcome: str, arguments: dict[str, Any], result: object,
               details: dict[str, Any]) -> None:
        """Emit the record of one decorated call (never raises)."""
        try:
            if outcome == "ok" and operation in _RESULT_FIELDS:
                details = {**details, **_RESULT_FIELDS[operation](result)}
            principal = arguments.get("principal")
            self._emit(operation, outcome, principal if isinstance(principal, Principal) else None,
                        row=details.pop("row", arguments.get("id")), user_id=arguments.get("user_id"),
                        turn_id=arguments.get("turn_id"), **details)
        except Exception:  # a record is never worth failing an operation for
            with contextlib.suppress(Exception):
                self._emit(operation, outcome, audit_error=True)

    def _emit(self, operation: str, outcome: str, principal: Principal | None = None, **details: Any) -> None:
        """Emit one audit record at INFO; identifiers (``row``, ``user_id``, ``turn_id`` among ``details``) become
        tags, anything that fails to build is left out."""
        row, user_id, turn_id = (details.pop(name, None) for name in ("row", "user_id", "turn_id"))
        record: dict[str, Any] = {"time": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                                  "op": operation, "outcome": outcome}
        try:
            record["vault"] = self._keys.vault_id.hex()
            record["pid"] = os.getpid()
            if isinstance(row, str) and parse_row_id(row) is not None:  # never an id the caller made up
                record["row"] = row
            record.update(self._audit_subjects(principal, user_id, turn_id, outcome))
            record.update({name: value for name, value in details.items() if isinstance(value, bool | int | str)})
            message = json.dumps(record, separators=(",", ":"))
        except Exception:  # keep what was safely built
            message = json.dumps({"time": record["time"], "op": operation, "outcome": outcome, "audit_error": True})
        with contextlib.suppress(Exception):  # a failing handler is logging's concern, never the caller's
            audit_log.info(message)

    def _audit_subjects(self, principal: Principal | None, user_id: object, turn_id: object,
                        outcome: str) -> dict[str, Any]:
        """Tags of the identifiers a call named. After a KeyUnavailable only a cached index key is used: an
        audit record never waits on a failing keyring."""
        names: dict[str, object]
        if principal is not None:
            names = {"user": principal.user_id, "actor": principal.actor, "channel": principal.channel}
        else:
            names = {"user": user_id}
        names["turn"] = turn_id
        given = {kind: value for kind, value in names.items() if isinstance(value, str)}
        if not given:
            return {}
        index: IndexKey | None
        try:
            index = self._keys.cached_index_key() if outcome == "key_unavailable" else self._keys.index_key()
        except VaultError:
            index = None
        if index is None:
            return {"tags_unavailable": True}
        return {kind: index.audit_tag(kind, value) for kind, value in given.items()}
