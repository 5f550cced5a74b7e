"""Engine integration: the ``Scratchpad`` an agent engine drives (``AsyncScratchpad`` for asyncio engines), and the
``scratchpad_read`` tool it offers."""

from vault.engine.async_scratchpad import AsyncScratchpad
from vault.engine.scratchpad import (
    COUNTERS,
    DEFAULT_THRESHOLD_BYTES,
    FAULT,
    NOT_FOUND,
    OFFLOADED_KEYS,
    STORE_FAILED,
    Scratchpad,
    offloaded_id,
    serialised_size,
)
from vault.engine.tool import SCRATCHPAD_READ_TOOL, tool_declaration

__all__ = ["COUNTERS", "DEFAULT_THRESHOLD_BYTES", "FAULT", "NOT_FOUND", "OFFLOADED_KEYS", "SCRATCHPAD_READ_TOOL",
           "STORE_FAILED", "AsyncScratchpad", "Scratchpad", "offloaded_id", "serialised_size", "tool_declaration"]
