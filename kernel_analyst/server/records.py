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
    """One session, live or dormant: its registry row's fields, and what this replica
    holds of it while it is live here (one record object per session id, so its lock is
    one)."""

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
    dormant_since: float | None = None
    """When its kernel was let go of (the conversation kept), seconds since the epoch;
    None while live."""
    dormant_reason: str | None = None
    """``idle`` or ``shutdown``; None while live."""
    deleted: bool = False
    """True once it was deleted (through any replica)."""
    kernel_id: str | None = None
    """The gateway kernel it runs in (a replica can reattach to it), else None."""
    owner: str | None = None
    """The replica holding its live session, as last read from the registry."""
    disk_bytes: int = 0
    """Its directory's size when it last went dormant."""
    session: KernelSession | None = None
    """This replica's live kernel session (None until it is used here, and once dormant)."""
    last_active: float = field(default_factory=time.monotonic)
    """Monotonic time of the last request that used it."""
    used_at: float = field(default_factory=time.time)
    """The same instant, seconds since the epoch (what the registry is told)."""
    flushed_at: float = 0.0
    """The last use written to the registry (writes are batched, not per request)."""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)
    """Held by whichever request is using the kernel."""
    resuming: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)
    """Held while the live session is found, woken, taken over or put to sleep."""
    current: Use | None = field(default=None, repr=False)
    """The request holding :attr:`lock`, if any."""
    run: asyncio.Task[Any] | None = field(default=None, repr=False)
    """The multi-step run (EDA, agent) in progress, which Stop cancels."""
    attached: int = 0
    """Jupyter clients (JupyterLab, VS Code) attached to it here over the kernel channels
    websocket; while any is, it is not put to sleep for being idle (as Jupyter's culler
    leaves connected kernels alone)."""

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
        """Take the registry's view of what other replicas may change: live or dormant,
        the owner and kernel, the last use."""
        self.dormant_since = row.dormant_since
        self.dormant_reason = row.dormant_reason if row.dormant else None  # set early while going dormant
        self.kernel_id, self.owner, self.disk_bytes = row.kernel_id, row.owner, row.disk_bytes
        if row.last_used_at > self.used_at:  # used through another replica since
            self.used_at = self.flushed_at = row.last_used_at
            self.last_active = time.monotonic() - max(0.0, time.time() - row.last_used_at)

    @property
    def open(self) -> bool:
        """True while it is live (its kernel runs, or starts at its next use)."""
        return self.dormant_since is None and not self.deleted

    @property
    def dormant(self) -> bool:
        """True while its kernel is let go of and the conversation kept (its next use wakes it)."""
        return self.dormant_since is not None and not self.deleted

    @property
    def state(self) -> str:
        """``open`` or ``dormant`` (``deleted`` for a record whose session is gone)."""
        return "deleted" if self.deleted else "dormant" if self.dormant else "open"

    @property
    def created_at(self) -> str:
        """ISO-8601 UTC creation time."""
        return iso(self.created) or ""

    @property
    def dormant_at(self) -> str | None:
        """ISO-8601 UTC time it went dormant, while it is."""
        return iso(self.dormant_since)

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
            "state": self.state,
            "dormant_since": self.dormant_at,
            "dormant_reason": self.dormant_reason,
            "closed_at": self.dormant_at,  # the names before dormant conversations
            "closed_reason": self.dormant_reason,
            "busy": self.lock.locked(),
            "idle_s": round(time.monotonic() - self.last_active, 3),
            "last_used_at": self.last_used_at,
            "disk_bytes": self.disk_bytes if self.dormant else None,
            "enforced": self.enforced,
        }

    @property
    def enforced(self) -> dict[str, str] | None:
        """What enforces each limit of its live kernel here (``cpu``, ``syscalls`` ...), if
        one runs here and says."""
        session = self.session
        kernel = session.describe().get("kernel") if session is not None and not session.closed else None
        found = kernel.get("enforced") if isinstance(kernel, dict) else None
        return dict(found) if isinstance(found, dict) else None

    def touch(self) -> None:
        """Record a use now (written to the registry by the next housekeeping pass)."""
        self.last_active = time.monotonic()
        self.used_at = time.time()

    def mark_dormant(self, reason: str, at: float, disk_bytes: int | None) -> KernelSession | None:
        """Dormant from ``at`` for ``reason``; returns the live session it held, if any."""
        self.dormant_since, self.dormant_reason = at, reason
        if disk_bytes is not None:
            self.disk_bytes = disk_bytes
        self.owner = self.kernel_id = None
        session, self.session = self.session, None
        return session

    def mark_deleted(self) -> KernelSession | None:
        """Deleted now; returns the live session it held, if any."""
        self.deleted = True
        session, self.session = self.session, None
        return session

    def mark_awake(self, owner: str) -> None:
        """Live again, held by ``owner`` (its kernel starting)."""
        self.dormant_since = self.dormant_reason = None
        self.owner, self.kernel_id = owner, None


__all__ = ["SessionRecord", "Use", "iso"]
