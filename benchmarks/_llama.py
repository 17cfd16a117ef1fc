"""What a benchmark needs from llama-server (``../shared/tools/local-model.sh``): each model
call's own timings, a chat model whose HTTP client collects them, a way to forget the
server's cached prompts so one run does not profit from another, and the served model's own
tokenizer and chat template for counting tokens.

llama-server reports ``timings`` with every completion: prompt tokens processed
(``prompt_n``) and taken from its cache (``cache_n``), tokens generated (``predicted_n``),
and the milliseconds of each. A plain reply carries them in its JSON body, a streamed one in
its last ``data:`` chunk; :class:`Timings` reads both without holding a stream back (a
streamed reply reaches the model's client chunk by chunk, as it would without the hook).
Other OpenAI-compatible servers send no timings: the calls are then counted with their
wall time only.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass
class ModelCall:
    """One model call as llama-server timed it."""

    prompt_n: int = 0
    """Prompt tokens processed (not found in the server's cache)."""
    cache_n: int = 0
    """Prompt tokens the server had cached."""
    prompt_ms: float = 0.0
    """Milliseconds spent on the processed prompt tokens."""
    predicted_n: int = 0
    """Tokens generated."""
    predicted_ms: float = 0.0
    """Milliseconds spent generating."""
    wall_s: float = 0.0
    """Seconds from sending the request to the reply's end, as the client saw them."""

    @classmethod
    def from_timings(cls, timings: dict[str, Any], wall_s: float) -> ModelCall:
        """A call from llama-server's ``timings`` object (empty for other servers)."""
        return cls(
            int(timings.get("prompt_n", 0)),
            int(timings.get("cache_n", 0)),
            float(timings.get("prompt_ms", 0.0)),
            int(timings.get("predicted_n", 0)),
            float(timings.get("predicted_ms", 0.0)),
            round(wall_s, 3),
        )


class Timings:
    """Collects llama-server's ``timings`` of each completion through httpx event hooks."""

    def __init__(self) -> None:
        self.calls: list[ModelCall] = []
        """The calls since the last :meth:`reset`, in the order they ended."""
        self.first_request: float | None = None
        """``time.monotonic()`` of the first request since the last :meth:`reset`."""
        self._sent: dict[int, float] = {}

    @property
    def hooks(self) -> dict[str, list[Any]]:
        """The ``event_hooks`` of an ``httpx.AsyncClient``."""
        return {"request": [self.on_request], "response": [self.on_response]}

    async def on_request(self, request: httpx.Request) -> None:
        now = time.monotonic()
        self.first_request = self.first_request or now
        self._sent[id(request)] = now

    async def on_response(self, response: httpx.Response) -> None:
        sent = self._sent.pop(id(response.request), time.monotonic())
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            response.stream = _TimedStream(response.stream, lambda t: self._record(t, sent))
            return
        await response.aread()
        try:
            body = response.json()
        except ValueError:
            body = {}
        self._record(body.get("timings", {}) if isinstance(body, dict) else {}, sent)

    def _record(self, timings: dict[str, Any], sent: float) -> None:
        self.calls.append(ModelCall.from_timings(timings, time.monotonic() - sent))

    def reset(self) -> None:
        """Forget the calls so far (before the next question)."""
        self.calls, self.first_request = [], None


class _TimedStream(httpx.AsyncByteStream):
    """A streamed reply passed on chunk by chunk; the ``timings`` of its last ``data:`` line
    are recorded when it ends."""

    def __init__(self, inner: Any, record: Any) -> None:
        self._inner = inner
        self._record = record
        self._pending = b""
        self._timings: dict[str, Any] = {}
        self._done = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            self._read(chunk)
            yield chunk
        self._finish()

    async def aclose(self) -> None:
        self._finish()
        await self._inner.aclose()

    def _read(self, chunk: bytes) -> None:
        *lines, self._pending = (self._pending + chunk).split(b"\n")
        for line in lines:
            if line.startswith(b"data:") and b'"timings"' in line:
                try:
                    self._timings = json.loads(line[5:]).get("timings", {})
                except (ValueError, AttributeError):
                    continue

    def _finish(self) -> None:
        if not self._done:
            self._done = True
            self._record(self._timings)


def timed_model(
    spec: str,
    *,
    base_url: str | None,
    timings: Timings,
    max_tokens: int,
    timeout: float | None = None,
) -> Any:
    """``load_chat_model(spec, ...)`` at temperature 0, without retries, whose HTTP client
    reports each call to ``timings``; ``timeout`` bounds each call (seconds)."""
    from kernel_analyst.agent import load_chat_model

    client = httpx.AsyncClient(event_hooks=timings.hooks, timeout=httpx.Timeout(timeout or 900.0))
    extra: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
    return load_chat_model(
        spec,
        base_url=base_url,
        temperature=0.0,
        max_tokens=max_tokens,
        http_async_client=client,
        max_retries=0,
        **extra,
    )


def erase_slots(base_url: str | None) -> None:
    """Forget llama-server's cached prompts (no-op for other servers). A slot that is
    generating for someone else's request is left alone."""
    if not base_url:
        return
    # Not the product's server_watch root: this module also runs beside older checkouts
    # (``$KA_BENCH_TREE``) that do not have it.
    root = base_url.rstrip("/").removesuffix("/v1")
    try:
        with urllib.request.urlopen(f"{root}/slots", timeout=5) as reply:
            slots = json.loads(reply.read())
        for slot in slots:
            if slot.get("is_processing"):
                continue
            request = urllib.request.Request(
                f"{root}/slots/{slot['id']}?action=erase", method="POST", data=b""
            )
            urllib.request.urlopen(request, timeout=5).close()
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return


class Tokenizer:
    """Tokens as the served model counts them: its ``/tokenize``, and its chat template with
    the tools through ``/apply-template`` (tiktoken would need a download, and is not this
    model's tokenizer)."""

    def __init__(self, base_url: str) -> None:
        self.root = base_url.rstrip("/").removesuffix("/v1")

    def _post(self, path: str, body: dict[str, Any]) -> Any:
        request = urllib.request.Request(self.root + path, json.dumps(body).encode(),
                                         {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read())

    def tokens(self, text: str) -> int:
        """Tokens of ``text`` as it is."""
        return len(self._post("/tokenize", {"content": text})["tokens"]) if text else 0

    def templated(self, messages: list[dict[str, Any]], tools: Sequence[Any] = ()) -> int:
        """Tokens of ``messages`` (and ``tools``) as the chat template renders them."""
        body: dict[str, Any] = {"messages": messages} | ({"tools": list(tools)} if tools else {})
        return self.tokens(self._post("/apply-template", body)["prompt"])
