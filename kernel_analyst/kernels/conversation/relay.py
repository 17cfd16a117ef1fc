"""A client's own Jupyter requests, relayed in the conversation's turn.

A person who opens the conversation in JupyterLab or VS Code sends the kernel messages
of their own: execute requests for cells, completion and inspection, ``kernel_info``,
comm messages of widgets. :meth:`KernelSession.relay` sends each as it is, with its
``msg_id`` and headers kept, so the client matches the kernel's answers to its requests
as with any kernel; and each takes the conversation's turn like any call (it waits
behind the agent's cell, and the agent's next cell waits behind it):

- an execute request that stores history (a cell the person ran) runs under the cell
  policy (``cell.CellRun``: its deadline, interrupt, a dead kernel) and is recorded in
  the audit trail like the agent's, marked ``metadata.kernel_analyst.by``; the session's
  bookkeeping (the variable diff) rides on it under reserved ``user_expressions`` names,
  which the client's copy of the reply does not show;
- any other execute request (silent, or an editor's helper code that stores no history)
  runs under the same policy, unrecorded and without bookkeeping;
- every other request is sent and waited for within a deadline: its reply, or its idle
  status when it has none (comm messages).

What the kernel answers goes to the client's tap: replies on shell, control and stdin.
IOPub is a broadcast: every client watching the conversation gets all of it
(:meth:`KernelSession.watch`), as from any kernel.
"""

from __future__ import annotations

import copy
import time
from typing import Any, Literal

from ..exceptions import KernelConnectionError
from ..launch import Channel, MessageTap, Outcome, RunningKernel
from .cell import EXPRESSION_PREFIX

Kind = Literal["cell", "execute", "request", "message"]
"""How a client's message is relayed: a recorded cell, an unrecorded execute request, a
request with a reply, or a message without one (comm messages)."""

_SETTLE_S = 5.0  # how long a relayed request's IOPub may trail its reply


def kind_of(msg: dict[str, Any]) -> Kind:
    """How ``msg`` (a client's shell message) is relayed."""
    msg_type = str((msg.get("header") or {}).get("msg_type", ""))
    if msg_type == "execute_request":
        content = msg.get("content") or {}
        recorded = bool(content.get("store_history", True)) and not content.get("silent", False)
        return "cell" if recorded else "execute"
    return "request" if msg_type.endswith("_request") else "message"


def client_tap(tap: MessageTap) -> MessageTap:
    """The tap a relayed request is given: its replies (IOPub reaches clients as a
    broadcast), the session's reserved user_expressions taken out of an execute reply."""

    def send_back(channel: str, msg: dict[str, Any]) -> None:
        if channel == "iopub":
            return
        content = msg.get("content")
        expressions = content.get("user_expressions") if isinstance(content, dict) else None
        if isinstance(content, dict) and isinstance(expressions, dict) \
                and any(k.startswith(EXPRESSION_PREFIX) for k in expressions):
            msg = copy.copy(msg)
            msg["content"] = {**content, "user_expressions": {
                k: v for k, v in expressions.items() if not k.startswith(EXPRESSION_PREFIX)}}
        tap(channel, msg)

    return send_back


async def forward(kernel: RunningKernel, channel: Channel, msg: dict[str, Any], tap: MessageTap, *,
                  deadline: float | None) -> Outcome:
    """Send a client's request that is not a cell and wait for it: its reply (or, for a
    message without one, its idle status), then the rest of its IOPub, within
    ``deadline``. How the wait ended is returned; the kernel's health is the next
    request's business (a death is noticed before it runs)."""
    router = kernel.router
    try:
        request = router.relay(channel, msg, on_message=tap)
    except KernelConnectionError:
        return Outcome.FAILED
    try:
        if kind_of(msg) == "message":
            await router.wait_any([request.idle], deadline)
            return Outcome.REPLY if request.idle.done() else Outcome.TIMEOUT
        outcome = await router.wait(request, deadline)
        if outcome is Outcome.REPLY and channel == "shell":
            await router.settle(request, _soonest(deadline))
        return outcome
    finally:
        router.forget(request)


def _soonest(deadline: float | None) -> float:
    settle_by = time.monotonic() + _SETTLE_S
    return settle_by if deadline is None else min(deadline, settle_by)


__all__ = ["Kind", "client_tap", "forward", "kind_of"]
