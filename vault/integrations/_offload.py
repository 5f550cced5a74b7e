"""The offloading wrappers' one rule, shared by every adapter: a tool result the vault cannot keep becomes an
error answer for the model (``STORE_FAILED``, no content), as ``call_tool`` and ``tools`` fail soft."""

from __future__ import annotations

import logging
from typing import Any

import pydantic_core

from vault.engine import STORE_FAILED, Scratchpad
from vault.errors import VaultError
from vault.inputs import check_identifier, check_step
from vault.model import Principal, check_principal

log = logging.getLogger("scratchvault.integrations")
PASS = object()  # a result the framework shows as it is: never stored
UNSTORABLE = object()  # a result no JSON holds (circular, nested too deep): STORE_FAILED, like a vault fault


def json_value(result: Any) -> Any:
    """``result`` as the JSON value the model would have seen; ``PASS`` for a type pydantic cannot serialise (the
    framework shows it its own way), ``UNSTORABLE`` for a value no JSON holds (pydantic raises ValueError)."""
    try:
        return pydantic_core.to_jsonable_python(result)
    except pydantic_core.PydanticSerializationError:
        return PASS
    except ValueError:  # circular, or nested deeper than pydantic serialises (the vault stores 256 levels)
        return UNSTORABLE


def observe_result(pad: Scratchpad, principal: Principal, turn_id: str, step_num: int, tool_name: str,
                   result: Any) -> Any:
    """What the model sees of a tool's result: ``pad.observe``'s answer, or ``STORE_FAILED`` when the vault
    cannot keep it (a closed vault, the keyring, the store, or a value it cannot store), logged by error type;
    never the large result inline. What the application set (principal, turn, step, tool name) raises when wrong."""
    check_principal(principal)
    check_identifier(turn_id, "turn_id")
    check_step(step_num)
    check_identifier(tool_name, "executor_name")
    if result is UNSTORABLE:
        log.warning("a tool result was not offloaded: not JSON (circular or nested too deep)")
        return dict(STORE_FAILED)
    try:
        return pad.observe(principal, turn_id, step_num, tool_name, result)
    except VaultError as error:
        log.warning("a tool result was not offloaded: %s", type(error).__name__)
        return dict(STORE_FAILED)
