"""A tenant's conversations as Jupyter sees kernels: kernelspecs, kernels and sessions.

Every conversation is offered three ways, so each stock client finds it where it looks:

- a **kernelspec** ``ka-<id>`` whose display name is the conversation's label: a
  JupyterLab started with ``--gateway-url`` starts kernels only from kernelspecs (its
  gateway manager lists only kernels it started itself), so starting this one adopts
  the conversation's live kernel;
- a **kernel** whose id is a UUID derived from the conversation's id (Jupyter's routes
  take UUID-shaped kernel ids), stable across restarts of the kernel and of the service;
- a **session** (what VS Code builds its list of live kernels from).

One more kernelspec, ``kernel-analyst`` (the default), starts a new conversation.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from ..records import SessionRecord

NEW_SPEC = "kernel-analyst"
"""The kernelspec that starts a new conversation."""
SPEC_PREFIX = "ka-"
"""A conversation's kernelspec is this prefix and its id."""
_NAMESPACE = uuid.UUID("5b0f3c56-6f0e-4c36-9a43-2f1e8c7d4a11")  # kernel-analyst's, for uuid5 ids


def kernel_id(record: SessionRecord) -> str:
    """The Jupyter kernel id of a conversation."""
    return str(uuid.uuid5(_NAMESPACE, f"kernel:{record.id}"))


def session_id(record: SessionRecord) -> str:
    """The Jupyter session id of a conversation."""
    return str(uuid.uuid5(_NAMESPACE, f"session:{record.id}"))


def spec_name(record: SessionRecord) -> str:
    """The kernelspec name of a conversation."""
    return SPEC_PREFIX + record.id


def display_name(record: SessionRecord) -> str:
    """How Jupyter clients name the conversation: its label, else its id."""
    title = record.label.strip() or f"conversation {record.id[:8]}"
    return f"{title} (kernel-analyst{', dormant' if record.dormant else ''})"


def _spec(name: str, display: str, extra: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "resources": {}, "spec": {
        "argv": [], "display_name": display, "language": "python", "interrupt_mode": "message",
        "env": {}, "metadata": {"kernel_analyst": extra}}}


def kernelspec(record: SessionRecord) -> dict[str, Any]:
    """The kernelspec model of a conversation."""
    return _spec(spec_name(record), display_name(record), {"conversation": record.id, "state": record.state})


def new_spec() -> dict[str, Any]:
    """The kernelspec model that starts a new conversation."""
    return _spec(NEW_SPEC, "New conversation (kernel-analyst)", {"new": True})


def kernelspecs(records: list[SessionRecord]) -> dict[str, Any]:
    """``GET /api/kernelspecs``."""
    specs = {NEW_SPEC: new_spec(), **{spec_name(r): kernelspec(r) for r in records}}
    return {"default": NEW_SPEC, "kernelspecs": specs}


def _jupyter_time(epoch: float) -> str:
    """Jupyter's timestamp (jupyter_server's gateway client parses exactly this shape)."""
    return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def kernel(record: SessionRecord) -> dict[str, Any]:
    """The kernel model of a conversation."""
    session = record.session
    busy = session is not None and not session.closed and session.busy
    return {"id": kernel_id(record), "name": spec_name(record),
            "last_activity": _jupyter_time(record.used_at),
            "execution_state": "busy" if busy else "idle", "connections": record.attached,
            "kernel_analyst": {"conversation": record.id, "state": record.state}}


def session(record: SessionRecord) -> dict[str, Any]:
    """The session model of a conversation."""
    name = record.label.strip() or record.id
    path = f"kernel-analyst/{record.id}.ipynb"
    return {"id": session_id(record), "path": path, "name": name, "type": "notebook",
            "kernel": kernel(record), "notebook": {"path": path, "name": name}}


__all__ = ["NEW_SPEC", "SPEC_PREFIX", "display_name", "kernel", "kernel_id", "kernelspec", "kernelspecs",
           "new_spec", "session", "session_id", "spec_name"]
