"""Whether a model server that has sent nothing for a while is at work, or stuck.

A call that waits ``CallLimits.timeout_s`` for the reply's next piece ends as stalled. On a
local llama.cpp server shared by several conversations, a request often waits that long in
the queue for a free slot, or behind the other slots' prompts, while the server works at
full speed: DABench questions ended so (``the model sent nothing for 300 s``) with four
conversations on a 4-slot server, each asking two attempts at once. llama.cpp's server says
what its slots are doing (``GET /slots``: the task each runs, the prompt tokens it has read,
the tokens it has written); when those move during a short look, the call waits another
window, up to :data:`QUEUE_WINDOWS` more. A server that does not answer ``/slots`` (another
kind, or a hosted API) gets no more than the one window, as before.
"""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

log = logging.getLogger(__name__)

QUEUE_WINDOWS = 5
"""Further windows of ``timeout_s`` a call may wait while the server is seen at work."""
LOOK_S = 180.0
"""How long the server is watched, at most, for a sign of work before a further window is
granted. llama.cpp's counters stand still while it reads a batch of prompts (up to 2,048
tokens, over all slots): 10-15 s seen on 2 cores with one conversation, 35-46 s with four
reading long prompts at once, and about twice that with a test run beside them, where two
DSEval calls ended after 60 s of standing counters; a server that is stuck costs this much
once more."""
LOOK_EVERY_S = 5.0
"""How often it is looked at meanwhile."""
_READ_S = 3.0
"""The ``/slots`` request's own timeout."""

Progress = tuple[tuple[Any, ...], ...]
"""What a server's slots have done so far (changes while it works)."""


class ServerWatch:
    """Looks at a model server's ``/slots`` (llama.cpp) for a call that waits long."""

    def __init__(self, base_url: str | None) -> None:
        self.root = _root(base_url)
        """The server's root URL (without ``/v1``); None: nothing to look at."""
        self.problem: str | None = None if self.root else "its server cannot be looked at"
        """Why the last look saw nothing (for the message of a call that waited in vain)."""

    @classmethod
    def of(cls, model: Any) -> ServerWatch:
        """The watch of a LangChain chat model's server (its ``openai_api_base`` or ``base_url``)."""
        return cls(base_url_of(model) or None)

    async def progress(self) -> Progress | None:
        """What the server's slots have done so far; None when it does not say (no ``/slots``,
        not reachable), and from then on for a server without the endpoint."""
        if self.root is None:
            return None
        self.problem = None
        try:
            return await asyncio.to_thread(self._read)
        except urllib.error.HTTPError as exc:  # 404 or 501: a server without /slots is not looked at again
            self.root = None
            self.problem = f"its server does not show its slots (/slots: HTTP {exc.code})"
        except (OSError, ValueError) as exc:
            log.warning("the model server's /slots could not be read", exc_info=True)
            self.problem = f"its server's /slots could not be read: {type(exc).__name__}: {exc}"
        return None

    def _read(self) -> Progress | None:
        with urllib.request.urlopen(f"{self.root}/slots", timeout=_READ_S) as reply:
            slots = json.loads(reply.read())
        if not isinstance(slots, list):
            self.problem = "its server's /slots is not a list of slots"
            return None
        return tuple(_done(slot) for slot in slots if isinstance(slot, dict))


def base_url_of(model: Any) -> str:
    """A LangChain chat model's server URL (``openai_api_base``, ``base_url``); "" for none."""
    return str(getattr(model, "openai_api_base", None) or getattr(model, "base_url", None) or "")


def _done(slot: dict[str, Any]) -> tuple[Any, ...]:
    tokens = slot.get("next_token")
    decoded = [t.get("n_decoded") for t in tokens if isinstance(t, dict)] if isinstance(tokens, list) else []
    return (slot.get("id"), slot.get("id_task"), slot.get("is_processing"),
            slot.get("n_prompt_tokens_processed"), tuple(decoded))


def _root(base_url: str | None) -> str | None:
    """``http://host:port/v1`` -> ``http://host:port``; None for no URL or not HTTP."""
    if not base_url:
        return None
    parts = urllib.parse.urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", "")).rstrip("/")


__all__ = ["LOOK_EVERY_S", "LOOK_S", "QUEUE_WINDOWS", "Progress", "ServerWatch", "base_url_of"]
