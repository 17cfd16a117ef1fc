"""Calling the model: streamed, bounded, its tokens and seconds counted.

One call per reply, streamed (``astream``; LangChain assembles the chunks, tool calls
included, into the reply): each visible piece goes out as a
:class:`~kernel_analyst.agent.events.ModelDelta` as it arrives, the text of the reply or the
code of a tool call, so every front end shows the reply while it is written. A reply is
bounded three ways:

- **a token limit** (``CallLimits.max_tokens``): sent on the wire where the model takes it
  (``max_tokens``), and counted here as the chunks arrive, so a model that ignores it is
  cut too;
- **a runaway** (:func:`~kernel_analyst.agent.feedback.runaway.runaway`): a reply seen
  repeating itself is cut before the limit;
- **a deadline** (``CallLimits.timeout_s``): the longest wait for the reply's next piece
  (its first included); a server that accepts the request and never answers ends the call,
  one seen at work (a llama.cpp server's slots moving, :mod:`.server_watch`) is given more
  windows, up to ``QUEUE_WINDOWS``.

Closing the stream closes the request, and a model server stops generating when its client
goes. A request the model's context cannot hold has its oldest observation trimmed and is
made again (:mod:`.context_window`); one that failed because the server's shared cache was
full (several conversations decoding at once) is made again as it was after a pause, up to
``BUSY_RETRIES`` times; any other failure ends the answer (``Turn.error``),
never the program. The reply is appended to the turn's messages, its token usage added up,
and a :class:`~kernel_analyst.agent.events.ModelReplied` says where its seconds went.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, SystemMessage
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.messages.utils import message_chunk_to_message
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool

from ..events import ModelDelta, ModelReplied
from ..exceptions import ToolCallingUnsupportedError
from ..feedback.runaway import runaway
from ..prompting import message
from ..protocols import ProtocolName
from .acting import note
from .context_window import is_context_overflow, is_shared_context_full, trim_oldest_observation
from .server_watch import LOOK_EVERY_S, LOOK_S, QUEUE_WINDOWS, ServerWatch, base_url_of
from .state import Turn

log = logging.getLogger(__name__)

CUT_KEY = "kernel_analyst_cut"
"""The reply's ``response_metadata`` key that says why it was cut short."""
_CHECK_EVERY = 8
"""Chunks between two looks for a runaway."""
BUSY_RETRIES = 3
"""Times a request is made again after the server's shared cache was full."""
BUSY_PAUSE_S = 2.0
"""The first pause before it is (then twice as long each time, each drawn between half and
one and a half times that: the requests that failed together do not come back together)."""


@dataclass(frozen=True)
class CallLimits:
    """The bounds of one model call."""

    max_tokens: int = 1024
    """Tokens one reply may have (a greedy small model that repeats itself goes on until the
    context is full)."""
    timeout_s: float = 300.0
    """Seconds the call may wait for the reply's next piece, the first one included (more
    while a llama.cpp server is seen at work: :mod:`.server_watch`)."""

    def __post_init__(self) -> None:
        if self.max_tokens < 16:
            raise ValueError(f"max_tokens must be at least 16; got {self.max_tokens}")
        if self.timeout_s <= 0:
            raise ValueError(f"the model timeout must be positive; got {self.timeout_s}")


class ModelStalled(TimeoutError):
    """The model sent nothing for ``CallLimits.timeout_s`` seconds (and its server, if it
    says, did nothing either)."""

    def __init__(self, seconds: float, why: str) -> None:
        super().__init__(f"no reply for {seconds:g} s: {why}")
        self.seconds = seconds
        """The wait that ran out."""
        self.why = why
        """What the look at the server saw (or why it could not look)."""


class _EventFailed(Exception):
    """An event callback raised while the reply streamed: its error, not the model's."""


class ModelCaller:
    """Calls one chat model for the turns of an analyst."""

    def __init__(self, model: BaseChatModel, tools: list[BaseTool], protocol: ProtocolName,
                 limits: CallLimits | None = None) -> None:
        model = own_deadline(model)
        self.model = model
        self.limits = limits or CallLimits()
        self.bound = bind_tools(model, tools, protocol)
        """The model with the tools bound; None when code is written as text from the start."""
        self.watch = ServerWatch.of(model)
        """Whether the model's server is at work, for a call that waits long."""

    async def call(self, turn: Turn) -> AIMessage | None:
        """The model's next reply (appended to the turn's messages); None when the call failed."""
        runnable: Runnable[LanguageModelInput, Any] = (
            self.bound if self.bound is not None and turn.protocol.binds_tools else self.model)
        temperature = turn.temperature if turn.temperature is not None else turn.sampling
        turn.temperature = None
        options = self._options(temperature)
        trimmed = busy = 0
        while True:
            try:
                reply = await self._stream(runnable.bind(**options) if options else runnable, turn)
                break
            except _EventFailed as exc:
                raise exc.__cause__ or exc from None  # the caller's callback failed: not a model failure
            except Exception as exc:  # any provider failure ends this answer, not the program
                if is_shared_context_full(exc) and busy < BUSY_RETRIES:
                    busy += 1
                    turn.remade += 1
                    pause = BUSY_PAUSE_S * 2 ** (busy - 1) * random.uniform(0.5, 1.5)
                    log.info("the model server's shared context was full in %s; asking again in %.1f s",
                             turn.conversation_id, pause)
                    await asyncio.sleep(pause)
                    continue
                if is_context_overflow(exc) and trim_oldest_observation(turn.messages):
                    trimmed += 1
                    turn.remade += 1
                    continue
                log.warning("model call failed in %s", turn.conversation_id, exc_info=True)
                turn.error = (message("model_stalled", seconds=f"{self.limits.timeout_s:g}", why=exc.why)
                              if isinstance(exc, ModelStalled) else
                              f"the model call failed: {type(exc).__name__}: {exc}")
                return None
        if trimmed:
            before = message("context_trimmed", count=turn.trimmed) if turn.trimmed else None
            turn.trimmed += trimmed
            note(turn, "context_trimmed", message("context_trimmed", count=turn.trimmed), replaces=before)
        turn.usage.add(dict(reply.usage_metadata) if reply.usage_metadata else None)
        turn.messages.append(reply)
        turn.replies += 1
        return reply

    async def warm(self, system: SystemMessage, *, binds_tools: bool) -> None:
        """Send the prefix every conversation shares (the system prompt and the tools) once,
        for a model server that caches prompts: a conversation's first request then pays only
        for its note and question. One token is asked for; a failure is only logged."""
        runnable: Runnable[LanguageModelInput, Any] = (
            self.bound if self.bound is not None and binds_tools else self.model)
        options = {"max_tokens": 1} if "max_tokens" in getattr(type(self.model), "model_fields", {}) else {}
        try:
            await asyncio.wait_for(runnable.bind(**options).ainvoke([system, HumanMessage("Hello.")]),
                                   self.limits.timeout_s)
        except Exception:  # a warm-up that fails costs the first question its prefix, nothing more
            log.info("warming the model's prompt prefix failed", exc_info=True)

    def _options(self, temperature: float | None) -> dict[str, Any]:
        """What this call sends beside the messages, where the model takes it: its sampling
        temperature, the token limit (when the model sets none itself), usage while streaming."""
        fields = getattr(type(self.model), "model_fields", {})
        options: dict[str, Any] = {}
        if temperature is not None and "temperature" in fields:
            options["temperature"] = temperature
        if "max_tokens" in fields and getattr(self.model, "max_tokens", None) is None:
            options["max_tokens"] = self.limits.max_tokens
        if "stream_usage" in fields and _streams(self.model):
            options["stream_usage"] = True
        return options

    async def _stream(self, runnable: Runnable[LanguageModelInput, Any], turn: Turn) -> AIMessage:
        """One streamed call: the reply assembled from its chunks, cut when it runs away."""
        started = time.monotonic()
        if turn.first_call_at is None:
            turn.first_call_at = started
        call = turn.replies + turn.remade + 1
        shown = _Shown()
        merged: AIMessageChunk | None = None
        first: float | None = None
        cut, count = "", 0
        stream: AsyncIterator[Any] = runnable.astream(turn.messages)
        try:
            while True:
                chunk = await self._next(stream)
                if chunk is _END:
                    break
                if not isinstance(chunk, AIMessageChunk):
                    if isinstance(chunk, AIMessage):  # a model that does not stream: the whole reply at once
                        merged = _as_chunk(chunk)
                    else:
                        continue
                else:
                    merged = chunk if merged is None else merged + chunk
                count += 1
                for delta in shown.deltas(merged):
                    first = first if first is not None else time.monotonic() - started
                    try:
                        turn.emit(ModelDelta(delta.text, call, delta.kind))
                    except Exception as exc:
                        raise _EventFailed() from exc
                if count >= self.limits.max_tokens:
                    cut = "limit"
                    break
                if count % _CHECK_EVERY == 0 and (why := runaway(shown.text)) is not None:
                    cut = why
                    break
        finally:
            await _close(stream)
        reply = _as_message(merged, cut)
        replied = _replied(call, reply, time.monotonic() - started, first, cut)
        turn.calls.append(replied)
        turn.emit(replied)
        return reply


    async def _next(self, stream: AsyncIterator[Any]) -> Any:
        """The stream's next chunk (``_END`` after the last); ModelStalled after ``timeout_s``
        without one, unless the server is seen at work (:mod:`.server_watch`)."""
        step = asyncio.ensure_future(_anext(stream))
        windows = 0
        try:
            while True:
                done, _ = await asyncio.wait({step}, timeout=self.limits.timeout_s)
                if done:
                    return step.result()
                if windows >= QUEUE_WINDOWS:
                    raise ModelStalled(self.limits.timeout_s, f"its server was at work, but {windows} more "
                                       f"waits of {self.limits.timeout_s:g} s brought no reply")
                if not await self._working(step):
                    raise ModelStalled(self.limits.timeout_s, self.watch.problem or
                                       f"its server's slots did not move for {LOOK_S:g} s")
                windows += 1
                log.info("the model server is at work but has not answered this call for %g s; "
                         "waiting (%d of %d more)", self.limits.timeout_s, windows, QUEUE_WINDOWS)
        finally:
            if not step.done():
                step.cancel()
                await asyncio.wait({step})

    async def _working(self, step: asyncio.Future[Any]) -> bool:
        """Whether the server's slots move while the call waits up to ``LOOK_S`` longer,
        looked at every ``LOOK_EVERY_S`` (or the chunk came meanwhile)."""
        before = await self.watch.progress()
        if before is None:
            return False
        deadline = time.monotonic() + LOOK_S
        while (left := deadline - time.monotonic()) > 0:
            await asyncio.wait({step}, timeout=min(LOOK_EVERY_S, left))
            if step.done():
                return True
            after = await self.watch.progress()
            if after is None:
                return False
            if after != before:
                return True
        return False


_END = object()
"""The end of a reply's stream."""


async def _anext(stream: AsyncIterator[Any]) -> Any:
    try:
        return await anext(stream)
    except StopAsyncIteration:
        return _END


def own_deadline(model: BaseChatModel) -> BaseChatModel:
    """The model without a deadline of its own between streamed chunks that its constructor
    was not given: langchain-openai 1.7 ends a stream after 120 s without a chunk
    (``stream_chunk_timeout``, or ``LANGCHAIN_OPENAI_STREAM_CHUNK_TIMEOUT_S``), before the
    caller's ``CallLimits.timeout_s`` and its look at a busy server (DABench 124 on a local
    server reading a long prompt: ``StreamChunkTimeoutError`` after 120 s, no chunk yet). A
    copy: the caller's own model object is not changed; a value set on it is kept."""
    field = "stream_chunk_timeout"
    if field not in type(model).model_fields or field in model.model_fields_set:
        return model
    if not getattr(model, field, None):
        return model
    return model.model_copy(update={"stream_chunk_timeout": None})


def _streams(model: BaseChatModel) -> bool:
    """Whether ``astream`` streams this model (its own ``streaming=False`` or
    ``disable_streaming`` makes it one whole reply, which takes no streaming options)."""
    if getattr(model, "disable_streaming", False) is True:
        return False
    return not ("streaming" in model.model_fields_set and getattr(model, "streaming", None) is False)


@dataclass(frozen=True)
class _Delta:
    text: str
    kind: Literal["text", "code"]


class _Shown:
    """What of a reply has been shown so far: its text, and the code of its first tool call."""

    def __init__(self) -> None:
        self.text = ""
        self.code = ""

    def deltas(self, merged: AIMessageChunk) -> list[_Delta]:
        found = []
        text = merged.text if isinstance(merged.text, str) else str(merged.text)
        if len(text) > len(self.text) and text.startswith(self.text):
            found.append(_Delta(text[len(self.text):], "text"))
            self.text = text
        calls = merged.tool_calls
        args = calls[0].get("args") if calls else None
        code = args.get("code") if isinstance(args, dict) else None
        if isinstance(code, str) and len(code) > len(self.code) and code.startswith(self.code):
            found.append(_Delta(code[len(self.code):], "code"))
            self.code = code
        return found


def _as_chunk(whole: AIMessage) -> AIMessageChunk:
    """A whole reply as the one chunk of its stream (its tool calls as their chunks)."""
    chunks = [tool_call_chunk(name=c["name"], args=json.dumps(c["args"]), id=c.get("id"), index=i)
              for i, c in enumerate(whole.tool_calls)]
    chunks += [tool_call_chunk(name=c.get("name"), args=c.get("args"), id=c.get("id"), index=len(chunks) + i)
               for i, c in enumerate(whole.invalid_tool_calls)]
    return AIMessageChunk(content=whole.content, id=whole.id, tool_call_chunks=chunks,
                          usage_metadata=whole.usage_metadata, response_metadata=whole.response_metadata,
                          additional_kwargs=whole.additional_kwargs)


def _as_message(merged: AIMessageChunk | None, cut: str) -> AIMessage:
    """The reply as one message (an empty one when nothing came), marked when it was cut."""
    if merged is None:
        return AIMessage(content="")
    reply: BaseMessage = message_chunk_to_message(merged)
    assert isinstance(reply, AIMessage)
    if cut:
        reply = reply.model_copy(update={"response_metadata": {**reply.response_metadata, CUT_KEY: cut}})
    return reply


def _replied(call: int, reply: AIMessage, seconds: float, first: float | None, cut: str) -> ModelReplied:
    usage: dict[str, Any] = dict(reply.usage_metadata or {})
    details: dict[str, Any] = dict(usage.get("input_token_details") or {})
    return ModelReplied(call, round(seconds, 3), round(first, 3) if first is not None else None,
                        int(usage.get("input_tokens", 0) or 0), int(details.get("cache_read", 0) or 0),
                        int(usage.get("output_tokens", 0) or 0), cut)


async def _close(stream: AsyncIterator[Any]) -> None:
    """Close a model stream (its HTTP request with it)."""
    close = getattr(stream, "aclose", None)
    if close is not None:
        try:
            await close()
        except Exception:  # a stream that fails as it closes has nothing more to give
            log.debug("closing the model stream failed", exc_info=True)


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


def serves_locally(model: BaseChatModel) -> bool:
    """The model is served on this machine (a llama.cpp, Ollama or vLLM server on a loopback
    address): warming its prompt cache costs nothing but a moment of its time."""
    host = urllib.parse.urlsplit(base_url_of(model)).hostname or ""
    return host in ("127.0.0.1", "localhost", "::1") or host.startswith("127.")


__all__ = ["CUT_KEY", "CallLimits", "ModelCaller", "ModelStalled", "bind_tools", "own_deadline",
           "serves_locally"]
