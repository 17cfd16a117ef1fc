"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1, for end-to-end tests.

It answers ``POST /v1/chat/completions`` with the next scripted reply, as one JSON
completion or, when the request asks to stream, as server-sent events with the tool-call
arguments split into fragments, the way OpenAI streams them. Every request body is kept
in :attr:`OpenAIServer.requests`. It serves a bounded number of requests and shuts itself
down after ``lifetime_s`` even if a test forgets to, so no thread outlives the test run::

    with OpenAIServer([ScriptedReply(code="1 + 1"), ScriptedReply(text="2")]) as server:
        model = ChatOpenAI(base_url=server.url, api_key="test", model="scripted")
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class ScriptedReply:
    """One assistant reply: text, and optionally a call of the ``python`` tool."""

    text: str = ""
    """The assistant's text (may be empty beside a tool call)."""
    code: str | None = None
    """Code for a ``python`` tool call, or None for a plain answer."""
    prompt_tokens: int = 11
    """Reported prompt tokens."""
    completion_tokens: int = 7
    """Reported completion tokens."""
    error_status: int | None = None
    """Answer with this HTTP error status instead of a completion (``error_message`` as
    the OpenAI-style error body), as a server does for a request too long for its context."""
    error_message: str = ""
    """The error's message."""
    error_code: str | None = None
    """The error's ``code`` (OpenAI's ``context_length_exceeded``; llama.cpp's server sends none)."""
    error_in_stream: bool = False
    """Send the error inside an accepted stream (HTTP 200, the reply's first words, then
    ``data: {"error": ...}``), as llama.cpp's server does when decoding fails on the way."""
    chunk_delay_s: float = 0.0
    """Streamed: seconds between two chunks (a model generating at its own pace)."""
    hang_s: float = 0.0
    """Seconds to wait, the request accepted, before answering at all (a stuck server)."""
    first_chunk_s: float = 0.0
    """Streamed: seconds between the response's headers and its first chunk (a server that
    has begun the reply and reads a long prompt first, as llama.cpp's server does)."""


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    owner: OpenAIServer


class OpenAIServer:
    """Serves scripted replies on an ephemeral loopback port (use as a context manager)."""

    def __init__(self, replies: Sequence[ScriptedReply], *, max_requests: int = 20,
                 lifetime_s: float = 60.0, slots: str = "none") -> None:
        self.replies = list(replies)
        self.slots = slots
        """What ``GET /slots`` says, as llama.cpp's server does: ``none`` (no such endpoint),
        ``working`` (a slot that has read and written more at every look) or ``stuck`` (a slot
        that says it is processing and never moves)."""
        self.slot_reads = 0
        """How many times ``/slots`` was read."""
        self.requests: list[dict[str, Any]] = []
        self.sent: dict[int, list[float]] = {}
        """Per request, when each streamed chunk was written (``time.monotonic``, the same clock
        in every process of this machine)."""
        self.disconnected: set[int] = set()
        """Requests whose client went away before the reply was written whole."""
        self.warmups: list[dict[str, Any]] = []
        """Requests for one token (a client warming the server's prompt cache): answered with
        one token of their own, outside the script and :attr:`requests`."""
        self.max_requests = max_requests
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="openai-test-server", daemon=True)
        self._watchdog = threading.Timer(lifetime_s, self._httpd.shutdown)
        self._watchdog.daemon = True

    @property
    def url(self) -> str:
        """Base URL for OpenAI clients (``.../v1``)."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def __enter__(self) -> OpenAIServer:
        self._thread.start()
        self._watchdog.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._watchdog.cancel()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)

    def take(self, body: dict[str, Any]) -> tuple[int, ScriptedReply | None]:
        """Record a request; return its number and reply (None when the script is over)."""
        with self._lock:
            self.requests.append(body)
            index = len(self.requests) - 1
            if index >= min(len(self.replies), self.max_requests):
                return index, None
            return index, self.replies[index]

    def call_id(self) -> str:
        """A fresh tool-call id."""
        return f"call_{next(self._ids):04d}"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def do_POST(self) -> None:
        owner = self.server.owner
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        if body.get("max_completion_tokens", body.get("max_tokens")) == 1:
            owner.warmups.append(body)
            warm = _Completion(ScriptedReply(text="Hi"), body.get("model", "scripted"), "chatcmpl-warm", "")
            if body.get("stream"):
                self._send_events(warm.chunks(with_usage=False), -1, 0.0)
            else:
                self._send_json(200, warm.whole())
            return
        index, reply = owner.take(body)
        if reply is None:
            self._send_json(500, {"error": {"message": f"script over at request {index + 1}",
                                            "type": "server_error"}})
            return
        if reply.error_status is not None:
            error = {"message": reply.error_message, "code": reply.error_code,
                     "type": "invalid_request_error"}
            if reply.error_in_stream and body.get("stream"):
                error = {"code": reply.error_status, "message": reply.error_message, "type": "server_error"}
                begun = _Completion(ScriptedReply(text=reply.text), body.get("model", "scripted"),
                                    f"chatcmpl-{index}", "")
                self._send_events(itertools.chain(itertools.islice(begun.chunks(with_usage=False), 3),
                                                  [{"error": error}]), index, 0.0)
            else:
                self._send_json(reply.error_status, {"error": error})
            return
        completion = _Completion(reply, body.get("model", "scripted"), f"chatcmpl-{index}",
                                 owner.call_id() if reply.code is not None else "")
        try:
            if reply.hang_s:
                time.sleep(reply.hang_s)
            if body.get("stream"):
                usage = bool((body.get("stream_options") or {}).get("include_usage"))
                self._send_events(completion.chunks(with_usage=usage), index, reply.chunk_delay_s,
                                  first_s=reply.first_chunk_s)
            else:
                self._send_json(200, completion.whole())
        except (BrokenPipeError, ConnectionResetError):
            owner.disconnected.add(index)
            self.close_connection = True

    def do_GET(self) -> None:
        owner = self.server.owner
        if self.path.rstrip("/") != "/slots" or owner.slots == "none":
            refused = {"code": 501, "message": "This server does not support slots endpoint.",
                       "type": "not_supported_error"}
            self._send_json(501, {"error": refused})
            return
        with owner._lock:
            owner.slot_reads += 1
            done = owner.slot_reads if owner.slots == "working" else 1
        slot = {"id": 0, "id_task": 7, "is_processing": True, "n_prompt_tokens": 4000,
                "n_prompt_tokens_processed": 100 * done, "next_token": [{"n_decoded": done}]}
        self._send_json(200, [slot])

    def _send_json(self, status: int, data: dict[str, Any] | list[Any]) -> None:
        payload = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _send_events(self, chunks: Iterator[dict[str, Any]], index: int, delay_s: float, *,
                     first_s: float = 0.0) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")  # the body ends when the connection does
        self.end_headers()
        if first_s:
            self.wfile.flush()
            time.sleep(first_s)
        sent = self.server.owner.sent.setdefault(index, [])
        for chunk in chunks:
            if delay_s and sent:
                time.sleep(delay_s)
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            self.wfile.flush()
            sent.append(time.monotonic())
        self.wfile.write(b"data: [DONE]\n\n")
        self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        return


@dataclass(frozen=True)
class _Completion:
    reply: ScriptedReply
    model: str
    id: str
    call_id: str

    def _usage(self) -> dict[str, int]:
        r = self.reply
        return {"prompt_tokens": r.prompt_tokens, "completion_tokens": r.completion_tokens,
                "total_tokens": r.prompt_tokens + r.completion_tokens}

    def _arguments(self) -> str:
        return json.dumps({"code": self.reply.code})

    def _finish_reason(self) -> str:
        return "tool_calls" if self.reply.code is not None else "stop"

    def whole(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.reply.text or None}
        if self.reply.code is not None:
            message["tool_calls"] = [{"id": self.call_id, "type": "function",
                                      "function": {"name": "python", "arguments": self._arguments()}}]
        return {"id": self.id, "object": "chat.completion", "created": int(time.time()), "model": self.model,
                "choices": [{"index": 0, "message": message, "finish_reason": self._finish_reason(),
                             "logprobs": None}],
                "usage": self._usage()}

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": self.id, "object": "chat.completion.chunk", "created": int(time.time()),
                "model": self.model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    def chunks(self, *, with_usage: bool) -> Iterator[dict[str, Any]]:
        yield self._chunk({"role": "assistant", "content": ""})
        words = self.reply.text.split(" ") if self.reply.text else []
        for i, word in enumerate(words):
            yield self._chunk({"content": word if i == len(words) - 1 else word + " "})
        if self.reply.code is not None:
            yield self._chunk({"tool_calls": [{"index": 0, "id": self.call_id, "type": "function",
                                               "function": {"name": "python", "arguments": ""}}]})
            arguments = self._arguments()
            for start in range(0, len(arguments), 16):
                yield self._chunk({"tool_calls": [{"index": 0,
                                                   "function": {"arguments": arguments[start:start + 16]}}]})
        yield self._chunk({}, self._finish_reason())
        if with_usage:
            yield {**self._chunk({}), "choices": [], "usage": self._usage()}
