"""A scripted chat model, so tests of an agent never call a real LLM.

:class:`ScriptedChatModel` is a LangChain chat model (a ``GenericFakeChatModel`` with
tool binding) that plays a script: each call takes the next reply, which is an
``AIMessage``, a string (a plain answer), or a function of the call that returns either.
Like pydantic-ai's ``FunctionModel``, a reply function sees everything the model was sent,
so a script can react to what the kernel printed::

    model = ScriptedChatModel(script=[
        tool_call("import pandas as pd; df = pd.read_csv('titanic.csv'); df.shape"),
        lambda call: f"The table has shape {call.last_tool_output}.",
    ])

Every call is recorded in :attr:`ScriptedChatModel.calls` (messages and bound tools).
Replies carry token usage (about four characters a token) unless ``report_usage=False``.
Streaming yields the text word by word, then the tool calls (unreadable ones as their raw
arguments) and usage in a last chunk.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import LanguageModelInput
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field, SkipValidation

from .exceptions import ScriptError
from .tools.kernel_tool import TOOL_NAME


@dataclass(frozen=True)
class ModelCall:
    """One call of a :class:`ScriptedChatModel`."""

    index: int
    """0-based number of the call."""
    messages: list[BaseMessage]
    """The messages the model was sent."""
    tools: list[dict[str, Any]]
    """The tools bound for this call, in OpenAI function format."""

    @property
    def tool_outputs(self) -> list[str]:
        """Text of every tool message sent, oldest first."""
        return [_text(m) for m in self.messages if isinstance(m, ToolMessage)]

    @property
    def last_tool_output(self) -> str:
        """Text of the most recent tool message ("" if none)."""
        outputs = self.tool_outputs
        return outputs[-1] if outputs else ""

    @property
    def last_message(self) -> BaseMessage:
        """The last message sent."""
        return self.messages[-1]


Reply = AIMessage | str | Callable[[ModelCall], AIMessage | str]
"""A scripted reply: a message, an answer text, or a function of the call."""


def tool_call(code: str, *, text: str = "", id: str | None = None, name: str = TOOL_NAME) -> AIMessage:
    """A reply that calls the Python tool with ``code`` (and says ``text`` beside it)."""
    call: dict[str, Any] = {"name": name, "args": {"code": code}, "id": id, "type": "tool_call"}
    return AIMessage(content=text, tool_calls=[call])


def tool_calls(*codes: str, text: str = "") -> AIMessage:
    """A reply that calls the Python tool several times in one message."""
    calls: list[dict[str, Any]] = [
        {"name": TOOL_NAME, "args": {"code": code}, "id": None, "type": "tool_call"} for code in codes
    ]
    return AIMessage(content=text, tool_calls=calls)


class ScriptedChatModel(GenericFakeChatModel):
    """A chat model that plays :attr:`script`, then calls :attr:`function` (if set)."""

    messages: Iterator[AIMessage | str] = Field(default_factory=lambda: iter(()), exclude=True)
    """Unused (the parent's reply source); replies come from :attr:`script`."""
    script: Annotated[list[Reply], SkipValidation()] = Field(default_factory=list)
    """Replies for the first calls, in order."""
    function: Callable[[ModelCall], AIMessage | str] | None = None
    """Reply for every call after the script; without it, extra calls raise ScriptError."""
    report_usage: bool = True
    """Attach ``usage_metadata`` to every reply."""
    chunk_delay_s: float = 0.0
    """Streamed: seconds between two chunks (a model writing at its own pace)."""
    calls: list[ModelCall] = Field(default_factory=list)
    """Every call so far."""

    @property
    def _llm_type(self) -> str:
        return "scripted-chat-model"

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind tools as an OpenAI-compatible model would; the replies see them."""
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        call = ModelCall(len(self.calls), list(messages), list(kwargs.get("tools") or []))
        self.calls.append(call)
        reply = self._reply(call)
        message = AIMessage(content=reply) if isinstance(reply, str) else reply
        return ChatResult(generations=[ChatGeneration(message=self._complete(message, call))])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        # Run in the caller's thread: reply functions may touch the caller's objects.
        return self._generate(messages, stop=stop, **kwargs)

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        message = self._generate(messages, stop=stop, **kwargs).generations[0].message
        assert isinstance(message, AIMessage)
        yield from _chunks(message, run_manager)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        message = self._generate(messages, stop=stop, **kwargs).generations[0].message
        assert isinstance(message, AIMessage)
        for i, chunk in enumerate(_chunks(message, None)):
            if i and self.chunk_delay_s:
                await asyncio.sleep(self.chunk_delay_s)
            if run_manager and isinstance(chunk.message.content, str) and chunk.message.content:
                await run_manager.on_llm_new_token(chunk.message.content, chunk=chunk)
            yield chunk

    def _reply(self, call: ModelCall) -> AIMessage | str:
        if call.index < len(self.script):
            reply = self.script[call.index]
        elif self.function is not None:
            reply = self.function
        else:
            raise ScriptError(
                f"the scripted model was called {call.index + 1} times but its script has "
                f"{len(self.script)} replies and no function; "
                f"last message: {_text(call.last_message)[:300]!r}")
        return reply(call) if callable(reply) else reply

    def _complete(self, message: AIMessage, call: ModelCall) -> AIMessage:
        """Give tool calls ids and attach usage, as a provider would."""
        update: dict[str, Any] = {}
        if any(not c.get("id") for c in message.tool_calls):
            update["tool_calls"] = [
                {**c, "id": c.get("id") or f"call_{call.index}_{i}"} for i, c in enumerate(message.tool_calls)
            ]
        if self.report_usage and message.usage_metadata is None:
            sent = sum(len(_text(m)) for m in call.messages)
            produced = len(_text(message)) + sum(len(json.dumps(c["args"])) for c in message.tool_calls)
            update["usage_metadata"] = {"input_tokens": sent // 4 + 1, "output_tokens": produced // 4 + 1,
                                        "total_tokens": sent // 4 + produced // 4 + 2}
        return message.model_copy(update=update) if update else message


def _chunks(message: AIMessage,
            run_manager: CallbackManagerForLLMRun | None) -> Iterator[ChatGenerationChunk]:
    text = _text(message)
    words = text.split(" ")
    for i, word in enumerate(words):
        token = word if i == len(words) - 1 else word + " "
        if not token:
            continue
        chunk = ChatGenerationChunk(message=AIMessageChunk(content=token, id=message.id))
        if run_manager:
            run_manager.on_llm_new_token(token, chunk=chunk)
        yield chunk
    tool_chunks: list[Any] = [
        {"name": c["name"], "args": json.dumps(c["args"]), "id": c["id"], "index": i,
         "type": "tool_call_chunk"} for i, c in enumerate(message.tool_calls)
    ] + [  # unreadable calls stream as their raw arguments, as a provider's do
        {"name": c.get("name"), "args": c.get("args"), "id": c.get("id"),
         "index": len(message.tool_calls) + i, "type": "tool_call_chunk"}
        for i, c in enumerate(message.invalid_tool_calls)
    ]
    yield ChatGenerationChunk(message=AIMessageChunk(
        content="", id=message.id, tool_call_chunks=tool_chunks, usage_metadata=message.usage_metadata,
        chunk_position="last"))


def _text(message: BaseMessage) -> str:
    return str(message.text)
