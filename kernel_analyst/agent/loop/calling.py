"""Calling the model: the tools bound or not, the context window, the usage.

One call per reply. A request the model's context cannot hold has its oldest observation
trimmed and is made again (:mod:`.context_window`); any other failure of the provider ends
the answer (``Turn.error``), never the program. The reply is appended to the turn's
messages and its token usage added up.
"""

from __future__ import annotations

import logging

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool

from ..exceptions import ToolCallingUnsupportedError
from ..prompting import message
from ..protocols import ProtocolName
from .acting import note
from .context_window import is_context_overflow, trim_oldest_observation
from .state import Turn

log = logging.getLogger(__name__)


class ModelCaller:
    """Calls one chat model for the turns of an analyst."""

    def __init__(self, model: BaseChatModel, tools: list[BaseTool], protocol: ProtocolName) -> None:
        self.model = model
        self.bound = bind_tools(model, tools, protocol)
        """The model with the tools bound; None when code is written as text from the start."""

    async def call(self, turn: Turn) -> AIMessage | None:
        """The model's next reply (appended to the turn's messages); None when the call failed."""
        model: Runnable[LanguageModelInput, AIMessage] = (
            self.bound if self.bound is not None and turn.protocol.binds_tools else self.model)
        temperature = turn.temperature if turn.temperature is not None else turn.sampling
        turn.temperature = None
        if temperature is not None and "temperature" in getattr(type(self.model), "model_fields", {}):
            model = model.bind(temperature=temperature)
        trimmed = 0
        while True:
            try:
                reply = await model.ainvoke(turn.messages)
                break
            except Exception as exc:  # any provider failure ends this answer, not the program
                if is_context_overflow(exc) and trim_oldest_observation(turn.messages):
                    trimmed += 1
                    continue
                log.warning("model call failed in %s", turn.conversation_id, exc_info=True)
                turn.error = f"the model call failed: {type(exc).__name__}: {exc}"
                return None
        if trimmed:
            before = message("context_trimmed", count=turn.trimmed) if turn.trimmed else None
            turn.trimmed += trimmed
            note(turn, "context_trimmed", message("context_trimmed", count=turn.trimmed), replaces=before)
        turn.usage.add(dict(reply.usage_metadata) if reply.usage_metadata else None)
        turn.messages.append(reply)
        turn.replies += 1
        return reply


def bind_tools(model: BaseChatModel, tools: list[BaseTool],
               protocol: ProtocolName) -> Runnable[LanguageModelInput, AIMessage] | None:
    """The model with the Python tool (and the undo tool) bound; None under ``code``, or
    under ``auto`` for a model that cannot bind tools (it will write code as text)."""
    if protocol == "code":
        return None
    try:
        return model.bind_tools(tools)
    except NotImplementedError as exc:
        if protocol == "auto":
            log.info("%s cannot bind tools; its conversations write code as text", type(model).__name__)
            return None
        raise ToolCallingUnsupportedError(
            f"{type(model).__name__} does not support tool calling (bind_tools); use protocol "
            "'code' or 'auto' (the model writes ```python blocks), or a model that calls tools") from exc


__all__ = ["ModelCaller", "bind_tools"]
