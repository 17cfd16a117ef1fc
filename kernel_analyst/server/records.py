"""What the service knows about one session: its registry row plus this replica's live
state (the kernel session, the request lock, the run in progress)."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..kernels import KernelSession
from .exceptions import RegistryError
from .registry import SessionRow


def iso(epoch: float | None) -> str | None:
    """ISO-8601 UTC (seconds) for an epoch time; None stays None."""
    if epoch is None:
        return None
    return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).isoformat(timespec="seconds")


@dataclass
class Use:
    """One request holding a session's lock (a cell, a variable listing ...)."""

    done: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class SessionRecord:
    """One session, open or closed: its registry row's fields, and what this replica
    holds of it while it is open (one record object per session id, so its lock is one)."""

    id: str
    """Public id (random; also the conversation id in the manager)."""
    tenant: str
    """The tenant that owns it."""
    directory: Path
    """The session directory (working files under ``work/``, ``audit.ipynb``)."""
    label: str = ""
    """A free-text label given at creation."""
    created: float = field(default_factory=time.time)
    """Creation time, seconds since the epoch."""
    closed: float | None = None
    """When it was closed, seconds since the epoch; None while open."""
    closed_reason: str | None = None
    """``idle``, ``deleted`` or ``error``; None while open."""
    kernel_id: str | None = None
    """The gateway kernel it runs in (a replica can reattach to it), else None."""
    owner: str | None = None
    """The replica holding its live session, as last read from the registry."""
    session: KernelSession | None = None
    """This replica's live kernel session (None until it is used here, and after close)."""
    last_active: float = field(default_factory=time.monotonic)
    """Monotonic time of the last request that used it."""
    used_at: float = field(default_factory=time.time)
    """The same instant, seconds since the epoch (what the registry is told)."""
    flushed_at: float = 0.0
    """The last use written to the registry (writes are batched, not per request)."""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)
    """Held by whichever request is using the kernel."""
    resuming: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)
    """Held while the live session is found, resumed or taken over."""
    current: Use | None = field(default=None, repr=False)
    """The request holding :attr:`lock`, if any."""
    run: asyncio.Task[Any] | None = field(default=None, repr=False)
    """The multi-step run (EDA, agent) in progress, which Stop cancels."""

    @classmethod
    def from_row(cls, row: SessionRow, root_dir: Path) -> SessionRecord:
        """A record for a registry row (nothing live yet)."""
        name = row.directory
        if not name or Path(name).name != name or name in (".", ".."):
            raise RegistryError(f"the registry names an unsafe directory for session {row.id}")
        record = cls(row.id, row.tenant, root_dir / name, label=row.label, created=row.created_at,
                     flushed_at=row.last_used_at)
        record.refresh(row)
        record.used_at = row.last_used_at
        record.last_active = time.monotonic() - max(0.0, time.time() - row.last_used_at)
        return record

    def refresh(self, row: SessionRow) -> None:
        """Take the registry's view of what other replicas may change (a session closed
        here is never reopened by a row read before the close was written)."""
        if row.closed_at is not None and self.closed_reason is None:
            self.closed, self.closed_reason = row.closed_at, row.closed_reason or "closed"
        self.kernel_id, self.owner = row.kernel_id, row.owner
        if row.last_used_at > self.used_at:  # used through another replica since
            self.used_at = self.flushed_at = row.last_used_at
            self.last_active = time.monotonic() - max(0.0, time.time() - row.last_used_at)

    @property
    def open(self) -> bool:
        """True until the session is closed."""
        return self.closed_reason is None

    @property
    def created_at(self) -> str:
        """ISO-8601 UTC creation time."""
        return iso(self.created) or ""

    @property
    def closed_at(self) -> str | None:
        """ISO-8601 UTC time it was closed, if it was."""
        return iso(self.closed)

    @property
    def last_used_at(self) -> str:
        """ISO-8601 UTC time of the last request that used it."""
        return iso(self.used_at) or ""

    @property
    def notebook_path(self) -> Path:
        """The audit notebook on disk (kept after close)."""
        return self.directory / "audit.ipynb"

    @property
    def workdir(self) -> Path:
        """The working directory the kernel sees."""
        return self.directory / "work"

    def to_dict(self) -> dict[str, Any]:
        """The public view (no paths of the server machine)."""
        return {
            "id": self.id,
            "label": self.label,
            "created_at": self.created_at,
            "state": "open" if self.open else "closed",
            "closed_at": self.closed_at,
            "closed_reason": self.closed_reason,
            "busy": self.lock.locked(),
            "idle_s": round(time.monotonic() - self.last_active, 3),
            "last_used_at": self.last_used_at,
        }

    def touch(self) -> None:
        """Record a use now (written to the registry by the next housekeeping pass)."""
        self.last_active = time.monotonic()
        self.used_at = time.time()

    def mark_closed(self, reason: str) -> KernelSession | None:
        """Closed now for ``reason``; returns the live session it held, if any."""
        self.closed_reason, self.closed = reason, time.time()
        session, self.session = self.session, None
        return session


__all__ = ["SessionRecord", "Use", "iso"]
