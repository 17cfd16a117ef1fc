"""Fitting a conversation into a model's context window.

Small local models run with 4k to 16k tokens of context. When a server says the request
is too long, the loop does not fail the answer: it replaces the oldest observation (a
step's output as the model saw it) with a one-line note and asks again, oldest first, and
never the newest one, which the model needs to go on. The audit notebook keeps every
output whole; only the model's copy is trimmed.

One overflow is not the request's: llama.cpp's server, with its slots sharing one cache
(its default when it picks the number of slots itself, ``kv_unified``), fails every request
it is decoding when that cache is full ("Context size has been exceeded."), whatever each
request's own length, and frees their slots. That request is made again after a pause
(:func:`is_shared_context_full`) before anything is trimmed.

Observations are marked by their message id (:func:`observation_id`): ids are LangChain's
own bookkeeping and never sent to a provider, so the mark costs the model nothing.
"""

from __future__ import annotations

import uuid

from langchain_core.messages import BaseMessage

from ..prompting import message

_OBSERVATION_PREFIX = "ka-observation-"
_TRIMMED_SUFFIX = "-trimmed"

# What providers and servers say when a model call fails for its context (lower case), with
# the kind of failure: "too long", the request does not fit (OpenAI's error code, vLLM's and
# OpenAI's wording, llama.cpp's server: "the request exceeds the available context size",
# type exceed_context_size_error; Ollama, Anthropic); "shared full", llama.cpp's server when
# the cache its slots share runs out while decoding (``llama_decode`` returns 1 with one
# sequence per batch): the request fitted when it was accepted and is asked again as it was,
# and only after that is it taken for too long.
_CONTEXT_PHRASES = (
    ("context_length_exceeded", "too long"),
    ("maximum context length", "too long"),
    ("exceeds the available context size", "too long"),
    ("exceed_context_size_error", "too long"),
    ("context size has been exceeded", "shared full"),
    ("context window", "too long"),
    ("prompt is too long", "too long"),
    ("too many tokens", "too long"),
    ("input is too long", "too long"),
)


def observation_id() -> str:
    """A message id that marks the message as an observation (trimmable)."""
    return f"{_OBSERVATION_PREFIX}{uuid.uuid4().hex[:12]}"


def is_observation(msg: BaseMessage) -> bool:
    """True for an observation that has not been trimmed yet."""
    return (msg.id or "").startswith(_OBSERVATION_PREFIX) and not (msg.id or "").endswith(_TRIMMED_SUFFIX)


def is_context_overflow(exc: BaseException) -> bool:
    """Whether a model call failed because the request does not fit the context (or the
    server's shared cache was full: see :func:`is_shared_context_full`)."""
    return bool(_context_failures(exc))


def is_shared_context_full(exc: BaseException) -> bool:
    """Whether a model call failed because the server's cache, shared by the requests it was
    decoding at once, was full: the same request usually fits a moment later."""
    return "shared full" in _context_failures(exc)


def _context_failures(exc: BaseException) -> set[str]:
    """The kinds of :data:`_CONTEXT_PHRASES` the exception or its causes say."""
    texts = [f"{type(error).__name__} {error} {getattr(error, 'code', '') or ''}".lower()
             for error in _chain(exc)]
    return {kind for phrase, kind in _CONTEXT_PHRASES if any(phrase in text for text in texts)}


def trim_oldest_observation(messages: list[BaseMessage]) -> bool:
    """Replace the oldest untrimmed observation (not the newest) with a short note, in
    place; False when nothing is left to trim."""
    found = [i for i, msg in enumerate(messages) if is_observation(msg)]
    if len(found) < 2:
        return False
    index = found[0]
    old = messages[index]
    messages[index] = old.model_copy(update={"content": message("observation_trimmed"),
                                             "id": f"{old.id}{_TRIMMED_SUFFIX}"})
    return True


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception and its causes (providers wrap HTTP errors)."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen and len(seen) < 8:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


__all__ = ["is_context_overflow", "is_observation", "is_shared_context_full", "observation_id",
           "trim_oldest_observation"]
