"""Middleware for LangChain 1.x agents (``langchain.agents.create_agent``; needs ``scratchvault[langchain]``):
``ScratchpadMiddleware(pad)`` registers ``scratchpad_read`` with the agent, binds it to a model call only while
the run's principal has rows in its turn, and makes the model's unparsable read calls runnable, so the tool answers
them instead of the agent dropping them. The principal and turn come from the agent's run context
(``create_agent(..., context_schema=...)``, ``invoke(..., context=...)``), as in :mod:`vault.integrations.langchain`;
wrap your own tools with its ``offloading`` so their large results are stored."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from langchain.agents.middleware import AgentMiddleware, ExtendedModelResponse, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, BaseMessage

from vault.integrations._offload import Pad
from vault.integrations.langchain import (
    TurnContext,
    aoffers,
    context_turn,
    offers,
    repair_reads,
    scratchpad_read_tool,
    without_read,
)

Result = ModelResponse | AIMessage | ExtendedModelResponse  # what a model call's handler may return
Handler = Callable[[ModelRequest], Result]
AsyncHandler = Callable[[ModelRequest], Awaitable[Result]]


class ScratchpadMiddleware(AgentMiddleware):
    """``scratchpad_read`` for ``create_agent``: offered per model call, unparsable calls repaired. ``pad`` is a
    Scratchpad or an AsyncScratchpad; ``context`` maps the run context to (principal, turn)."""

    def __init__(self, pad: Pad, *, context: TurnContext = context_turn) -> None:
        super().__init__()
        self.tools = [scratchpad_read_tool(pad, context=context)]  # checks pad and context
        self._pad, self._context = pad, context

    def wrap_model_call(self, request: ModelRequest, handler: Handler) -> Result:
        """Bind the read tool only when offered, then repair the model's read calls LangChain could not parse."""
        if not offers(self._pad, request.runtime, context=self._context):
            request = request.override(tools=without_read(request.tools))
        return _repaired(handler(request))

    async def awrap_model_call(self, request: ModelRequest, handler: AsyncHandler) -> Result:
        """:meth:`wrap_model_call` for async agents: the vault's lookup runs off the event loop."""
        if not await aoffers(self._pad, request.runtime, context=self._context):
            request = request.override(tools=without_read(request.tools))
        return _repaired(await handler(request))


def _repaired(response: Result) -> Result:
    """The model's answer with each AI message's unparsable read calls made runnable, in any of its forms."""
    if isinstance(response, AIMessage):
        return repair_reads(response)
    if isinstance(response, ExtendedModelResponse):
        return ExtendedModelResponse(model_response=_repaired_messages(response.model_response),
                                     command=response.command)
    return _repaired_messages(response)


def _repaired_messages(response: ModelResponse) -> ModelResponse:
    messages: list[BaseMessage] = [repair_reads(message) if isinstance(message, AIMessage) else message
                                   for message in response.result]
    return ModelResponse(result=messages, structured_response=response.structured_response)
