"""The one request path to a kernel: send, route by parent id, wait, settle.

Every message a kernel sends reaches its :class:`RequestRouter` (one per running
kernel), which hands it to the in-flight :class:`Request` whose ``msg_id`` is the
message's parent. The ready loop, the session and the gateway backend all send through
it, so the rules live here once:

- **Waiting** (:meth:`RequestRouter.wait`) races the reply against the kernel's exit
  and an absolute deadline (``time.monotonic()``) and returns a typed :class:`Outcome`.
  Cancelling the waiting task propagates; the caller decides what the kernel must do.
- **Completion** (:meth:`RequestRouter.settle`) is the reply plus this request's
  ``idle`` status on IOPub. When the idle is late, silence proves nothing on a busy
  machine, so the router proves that IOPub has caught up instead: it sends a
  ``kernel_info_request``, whose own ``status`` messages the kernel publishes only after
  everything the earlier request published (IOPub is one ordered stream, and the kernel
  handles shell requests one at a time). Only the kernel's death or the deadline end
  that wait early.
- **A reply that will never come is known at once.** ipykernel drops a request's reply
  when an interrupt lands while it handles the request but outside the cell's code
  (finishing the reply, flushing output): it logs "KeyboardInterrupt caught in kernel",
  publishes ``idle`` and moves on. When a shell request's ``idle`` arrives without its
  reply, :meth:`RequestRouter.wait` sends a ``kernel_info_request``: the kernel answers
  shell requests one at a time on one ordered stream, so the probe's reply arriving
  first proves the earlier reply was never sent (:attr:`Outcome.NO_REPLY`), instead of
  the caller waiting out its deadline and replacing a healthy kernel.
- **Nothing disappears silently.** Messages for unknown parents are counted and logged
  at debug level; output that arrives for a request already settled goes to its
  ``late`` callback; a connection that fails (a reader task died, a send failed) fails
  every pending request at once with :class:`KernelConnectionError`.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ..exceptions import KernelConnectionError

log = logging.getLogger(__name__)

Channel = Literal["shell", "control", "iopub", "stdin"]
"""The kernel's message channels (the Jupyter messaging protocol's names)."""

IopubHandler = Callable[[str, dict[str, Any]], None]
"""Called with (msg_type, content) for each IOPub message of a request but ``status``."""
MessageTap = Callable[[str, dict[str, Any]], None]
"""Called with (channel, whole message) for each message it is given, as received."""

PROBE_AFTER_S = 0.25
"""How long a settled reply waits for its idle status before IOPub is probed."""
_PROBE_BACKOFF_MAX_S = 4.0
_FINISHED_KEPT = 256  # settled requests whose late output is still recognised


class Connection(Protocol):
    """What the router needs of the kernel it serves (a ``RunningKernel`` is one)."""

    def send(self, channel: Channel, msg_type: str, content: dict[str, Any]) -> str:
        """Send a message; its ``msg_id``."""

    def send_message(self, channel: Channel, msg: dict[str, Any]) -> str:
        """Send a whole message built elsewhere (its header kept); its ``msg_id``."""

    async def wait_exited(self) -> None:
        """Return once the kernel process has ended."""

    def is_alive(self) -> bool:
        """True while the kernel process runs."""


class Outcome(enum.Enum):
    """How waiting for a reply ended."""

    REPLY = "reply"
    """The reply arrived."""
    TIMEOUT = "timeout"
    """The deadline passed first; the request may still be running."""
    DIED = "died"
    """The kernel process ended first."""
    FAILED = "failed"
    """The connection to the kernel failed (a reader stopped, a send failed)."""
    NO_REPLY = "no_reply"
    """The kernel finished the request without replying: its ``idle`` came, and a later
    shell request was answered first. The kernel is usable."""


class Settled(enum.Enum):
    """How waiting for a request's IOPub traffic to end finished."""

    IDLE = "idle"
    """The request's own ``idle`` status arrived: every output is in."""
    CAUGHT_UP = "caught_up"
    """No ``idle`` came, but a later probe's status did, so IOPub has delivered all the
    request's output (its idle message was lost)."""
    DIED = "died"
    """The kernel ended before IOPub was proven complete."""
    TIMEOUT = "timeout"
    """The deadline passed before IOPub was proven complete."""
    FAILED = "failed"
    """The connection failed."""


def _future() -> asyncio.Future[Any]:
    return asyncio.get_running_loop().create_future()


@dataclass(eq=False)
class Request:
    """One in-flight request and everything routed to it."""

    msg_id: str
    """The request's ``msg_id``: replies and IOPub messages carry it as parent."""
    msg_type: str
    """The request type (``execute_request`` ...)."""
    channel: str = "shell"
    """The channel it was sent on."""
    on_iopub: IopubHandler | None = None
    """Receives the request's IOPub output messages."""
    reply: asyncio.Future[dict[str, Any]] = field(default_factory=_future)
    """Resolved with the reply message (or failed with KernelConnectionError)."""
    busy: asyncio.Future[None] = field(default_factory=_future)
    """Resolved by the first ``status`` message of this request on IOPub."""
    idle: asyncio.Future[None] = field(default_factory=_future)
    """Resolved by this request's ``idle`` status on IOPub."""
    on_message: MessageTap | None = None
    """Sees every message routed to this request, whole, on any channel (a relayed
    request's replies go back to the client that sent it)."""

    @property
    def content(self) -> dict[str, Any]:
        """The reply's content (call once :attr:`reply` is done)."""
        content: dict[str, Any] = self.reply.result().get("content", {})
        return content


def _tap(tap: MessageTap, channel: str, msg: dict[str, Any]) -> None:
    """Show ``msg`` to a tap; its failure is logged, and costs no request its reply."""
    try:
        tap(channel, msg)
    except Exception:
        log.exception("a message tap failed")


def _resolve(fut: asyncio.Future[Any], value: Any = None) -> None:
    if not fut.done():
        fut.set_result(value)


class RequestRouter:
    """Every in-flight request of one kernel, and the routing of its messages.

    Created by the kernel's backend; the kernel's connection calls :meth:`deliver` for
    every incoming message and :meth:`fail` when it breaks.
    """

    def __init__(self, kernel: Connection) -> None:
        self._kernel = kernel
        self._pending: dict[str, Request] = {}
        self._finished: OrderedDict[str, IopubHandler | None] = OrderedDict()
        self._exit: asyncio.Future[None] | None = None
        self._broken: asyncio.Future[None] | None = None
        self.failure: str | None = None
        """Why the connection failed, once it has."""
        self.unknown_parents = 0
        """Messages whose parent is no request of ours (another client's traffic)."""
        self.on_unrouted: Callable[[str, dict[str, Any]], None] | None = None
        """Sees every message no pending request claims (status without a parent ...)."""
        self.listeners: list[MessageTap] = []
        """See every message the kernel sends, before it is routed (the clients attached
        to a conversation watch its IOPub this way)."""

    # -- sending ------------------------------------------------------------------------

    def send(self, channel: Channel, msg_type: str, content: dict[str, Any], *,
             on_iopub: IopubHandler | None = None) -> Request:
        """Send a request and register it for routing; return it."""
        if self.failure is not None:
            raise KernelConnectionError(f"the connection to the kernel failed: {self.failure}")
        msg_id = self._kernel.send(channel, msg_type, content)
        request = Request(msg_id, msg_type, channel, on_iopub)
        self._pending[msg_id] = request
        return request

    def relay(self, channel: Channel, msg: dict[str, Any], *, on_message: MessageTap,
              on_iopub: IopubHandler | None = None) -> Request:
        """Send a whole message built by someone else (a client attached to the
        conversation: its ``msg_id`` and headers kept) and route what comes back for it,
        whole, to ``on_message``. Raises KernelConnectionError when the connection failed,
        and ValueError for a ``msg_id`` already in flight."""
        if self.failure is not None:
            raise KernelConnectionError(f"the connection to the kernel failed: {self.failure}")
        header = msg.get("header") or {}
        msg_id = header.get("msg_id")
        if not isinstance(msg_id, str) or not msg_id:
            raise ValueError("the message has no header.msg_id")
        if msg_id in self._pending:
            raise ValueError(f"a request with msg_id {msg_id!r} is in flight already")
        request = Request(msg_id, str(header.get("msg_type")), channel, on_iopub, on_message=on_message)
        self._pending[msg_id] = request  # before the send: a reply cannot come before it is routed
        try:
            self._kernel.send_message(channel, msg)
        except BaseException:
            del self._pending[msg_id]
            raise
        return request

    def forget(self, request: Request, *, late: IopubHandler | None = None) -> None:
        """Stop routing to ``request``; later IOPub output for it goes to ``late``."""
        if self._pending.pop(request.msg_id, None) is None:
            return
        self._finished[request.msg_id] = late
        while len(self._finished) > _FINISHED_KEPT:
            self._finished.popitem(last=False)

    @property
    def pending(self) -> int:
        """Requests still routed."""
        return len(self._pending)

    # -- incoming -------------------------------------------------------------------------

    def deliver(self, channel: str, msg: dict[str, Any]) -> None:
        """Route one incoming message (the connection's only callback)."""
        for listener in self.listeners:
            _tap(listener, channel, msg)
        parent = (msg.get("parent_header") or {}).get("msg_id")
        request = self._pending.get(parent) if parent else None
        if request is not None and request.on_message is not None:
            _tap(request.on_message, channel, msg)
        if request is None:
            self._unrouted(channel, msg, parent)
        elif channel == "iopub":
            self._iopub(request, msg)
        elif channel in ("shell", "control"):
            _resolve(request.reply, msg)
        else:  # stdin: input_request, though every request sets allow_stdin=False
            log.debug("ignored %s message %s", channel, msg.get("msg_type"))

    @staticmethod
    def _iopub(request: Request, msg: dict[str, Any]) -> None:
        msg_type = msg.get("header", {}).get("msg_type")
        content = msg.get("content", {})
        if msg_type == "status":
            _resolve(request.busy)
            if content.get("execution_state") == "idle":
                _resolve(request.idle)
        elif request.on_iopub is not None:
            request.on_iopub(str(msg_type), content)

    def _unrouted(self, channel: str, msg: dict[str, Any], parent: str | None) -> None:
        if parent and parent in self._finished:
            late = self._finished[parent]
            msg_type = str(msg.get("header", {}).get("msg_type"))
            if channel == "iopub" and late is not None and msg_type != "status":
                late(msg_type, msg.get("content", {}))
        elif parent:
            self.unknown_parents += 1
            log.debug("message %s on %s for unknown parent %s", msg.get("msg_type"), channel, parent)
        if self.on_unrouted is not None:
            self.on_unrouted(channel, msg)

    def fail(self, reason: str) -> None:
        """The connection broke: fail every pending request now, and every later send."""
        if self.failure is None:
            self.failure = reason
            log.warning("connection to a kernel failed: %s", reason)
        error = KernelConnectionError(f"the connection to the kernel failed: {reason}")
        for request in self._pending.values():
            if not request.reply.done():
                request.reply.set_exception(error)
        if self._broken is not None:
            _resolve(self._broken)

    def fail_request(self, msg_id: str, reason: str) -> None:
        """One send failed: fail that request only."""
        request = self._pending.get(msg_id)
        if request is not None and not request.reply.done():
            request.reply.set_exception(KernelConnectionError(f"could not send the request: {reason}"))

    # -- waiting --------------------------------------------------------------------------

    def _watch(self) -> list[asyncio.Future[Any]]:
        """Futures that end any wait: the kernel's exit and a broken connection."""
        if self._exit is None:
            self._exit = asyncio.ensure_future(self._kernel.wait_exited())
        if self._broken is None:
            self._broken = _future()
            if self.failure is not None:
                _resolve(self._broken)
        return [self._exit, self._broken]

    async def wait_any(self, futures: list[asyncio.Future[Any]], deadline: float | None) -> None:
        """Return once one of ``futures`` is done, the kernel has exited, the connection
        has failed, or ``deadline`` has passed (whichever is first)."""
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        await asyncio.wait([*futures, *self._watch()], timeout=timeout,
                           return_when=asyncio.FIRST_COMPLETED)

    async def wait(self, request: Request, deadline: float | None) -> Outcome:
        """Wait for the reply, the kernel's exit, a failure or ``deadline``; a shell
        request whose ``idle`` came without its reply is probed (see the module doc)."""
        probe: Request | None = None
        idle_at: float | None = None
        try:
            while not request.reply.done():
                if self.failure is not None or not self._kernel.is_alive():
                    break
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    break
                watch: list[asyncio.Future[Any]] = [request.reply]
                until = deadline
                if probe is not None:
                    if probe.reply.done():
                        if probe.reply.exception() is not None:
                            break
                        return Outcome.NO_REPLY
                    watch.append(probe.reply)
                elif request.channel == "shell" and not request.idle.done():
                    watch.append(request.idle)
                elif request.channel == "shell":
                    # The reply travels on another socket than the idle: give it a moment
                    # before spending a probe.
                    idle_at = now if idle_at is None else idle_at
                    probe_at = idle_at + PROBE_AFTER_S
                    if now >= probe_at:
                        probe = self.send("shell", "kernel_info_request", {})
                        continue
                    until = probe_at if deadline is None else min(probe_at, deadline)
                await self.wait_any(watch, until)
        finally:
            if probe is not None:
                self.forget(probe)
        if request.reply.done():
            return Outcome.FAILED if request.reply.exception() is not None else Outcome.REPLY
        if self.failure is not None:
            return Outcome.FAILED
        return Outcome.TIMEOUT if self._kernel.is_alive() else Outcome.DIED

    async def settle(self, request: Request, deadline: float | None) -> Settled:
        """After the reply: wait until IOPub has delivered all of ``request``'s output."""
        delay = PROBE_AFTER_S
        probe: Request | None = None
        try:
            while not request.idle.done():
                if probe is not None and probe.busy.done():
                    return Settled.CAUGHT_UP
                if self.failure is not None:
                    return Settled.FAILED
                if not self._kernel.is_alive():
                    return Settled.DIED
                if deadline is not None and time.monotonic() >= deadline:
                    return Settled.TIMEOUT
                watch = [request.idle] + ([probe.busy] if probe is not None else [])
                limit = time.monotonic() + delay
                await self.wait_any(watch, limit if deadline is None else min(limit, deadline))
                if not request.idle.done() and time.monotonic() >= limit:
                    if probe is not None:
                        self.forget(probe)
                    probe = self.send("shell", "kernel_info_request", {})
                    delay = min(2 * delay, _PROBE_BACKOFF_MAX_S)
            return Settled.IDLE
        finally:
            if probe is not None:
                self.forget(probe)

    async def request(self, channel: Channel, msg_type: str, content: dict[str, Any], *,
                      deadline: float | None, on_iopub: IopubHandler | None = None,
                      ) -> tuple[Outcome, Request]:
        """Send, wait for the reply and stop routing: the whole path of a short request."""
        request = self.send(channel, msg_type, content, on_iopub=on_iopub)
        try:
            return await self.wait(request, deadline), request
        finally:
            self.forget(request)


def deadline_after(timeout: float | None) -> float | None:
    """The absolute deadline ``timeout`` seconds from now (None for no deadline)."""
    return None if timeout is None else time.monotonic() + timeout
