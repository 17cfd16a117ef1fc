"""The sessions of many tenants over one :class:`SessionManager`.

A tenant sees only its own sessions: another tenant's id is reported as unknown, never
as forbidden. Every kernel operation runs under the session's request lock, so a
request holding it knows that the cell running in the kernel is its own (which is what
makes interrupting on a client disconnect safe). Closed sessions (deleted ones aside)
keep their record, so their audit notebook stays downloadable.

Routes and the page use only this record API (:meth:`SessionService.sessions_of`,
:meth:`~SessionService.get`, :meth:`~SessionService.notebook`, :meth:`~SessionService.stop`
...), so where records are kept (process memory today) can change behind it.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
import math
import secrets
import shutil
import time
from collections import deque
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..frontend.sessions import kernel_backend
from ..frontend.settings import KernelSettings
from ..kernels import KernelSession, SessionManager
from ..kernels.manager import directory_name
from .config import ServerConfig
from .exceptions import BadRequestError, SessionGoneError, SessionNotFoundError, TooManySessionsError

log = logging.getLogger(__name__)


StopResult = Literal["run", "cell", "idle"]
"""What :meth:`SessionService.stop` stopped: a multi-step run, a cell, or nothing."""


def _now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


@dataclass
class _Use:
    """One request holding a session's lock (a cell, a variable listing ...)."""

    done: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class SessionRecord:
    """What the service knows about one session, open or closed."""

    id: str
    """Public id (random; also the conversation id in the manager)."""
    tenant: str
    """The tenant that owns it."""
    directory: Path
    """The session directory (working files under ``work/``, ``audit.ipynb``)."""
    label: str = ""
    """A free-text label given at creation."""
    created_at: str = field(default_factory=_now_iso)
    """ISO-8601 UTC creation time."""
    closed_at: str | None = None
    """When it was closed, if it was."""
    closed_reason: str | None = None
    """``idle``, ``deleted``, ``shutdown`` or ``error``; None while open."""
    session: KernelSession | None = None
    """The live kernel session (None while starting and after close)."""
    last_active: float = field(default_factory=time.monotonic)
    """Monotonic time of the last request that used it."""
    last_used_at: str = field(default_factory=_now_iso)
    """ISO-8601 UTC time of the last request that used it."""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)
    """Held by whichever request is using the kernel."""
    current: _Use | None = field(default=None, repr=False)
    """The request holding :attr:`lock`, if any."""
    run: asyncio.Task[Any] | None = field(default=None, repr=False)
    """The multi-step run (EDA, agent) in progress, which Stop cancels."""

    @property
    def open(self) -> bool:
        """True until the session is closed."""
        return self.closed_reason is None

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
        """Record a use now."""
        self.last_active = time.monotonic()
        self.last_used_at = _now_iso()


class SessionService:
    """Tenants' sessions with limits, idle culling and kept audit trails.

    Use as an async context manager; nothing starts in the constructor.
    """

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.manager = SessionManager(config.root_dir, limits=config.limits, pool_size=config.pool_size,
                                      backend=kernel_backend(KernelSettings(gateway_url=config.gateway_url)))
        self._records: dict[str, SessionRecord] = {}
        self._closed_order: deque[str] = deque()
        self._starting: dict[str, int] = {}
        self._admit = asyncio.Lock()
        self._background: set[asyncio.Task[Any]] = set()
        self._disposals: set[asyncio.Task[None]] = set()
        self._culler: asyncio.Task[None] | None = None

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> SessionService:
        """Start the session manager and the idle culler."""
        await self.manager.start()
        if self.config.idle_timeout_s:
            self._culler = asyncio.create_task(self._cull_loop(), name="server-idle-culler")
        return self

    async def __aenter__(self) -> SessionService:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop background work and close every kernel (notebooks stay on disk)."""
        if self._culler is not None:
            self._culler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._culler
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await asyncio.gather(*self._disposals, return_exceptions=True)  # never cut a shutdown short
        for record in self._records.values():
            if record.open:
                self._mark_closed(record, "shutdown")
        await self.manager.aclose()

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """Run ``coro`` in the background, kept referenced and cancelled at close."""
        task = asyncio.create_task(coro, name=name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    # -- sessions ----------------------------------------------------------------------

    async def create(self, tenant: str, *, label: str = "") -> SessionRecord:
        """Start a new session for ``tenant``; 429 (TooManySessionsError) when full."""
        async with self._admit:
            self._check_capacity(tenant)
            self._starting[tenant] = self._starting.get(tenant, 0) + 1  # holds a slot while starting
        sid = secrets.token_hex(8)
        record = SessionRecord(sid, tenant, self.config.root_dir / directory_name(sid), label=label)
        try:
            record.session = await self.manager.session(sid)
        finally:
            self._starting[tenant] -= 1
        self._records[sid] = record  # visible only once its kernel is up
        record.touch()
        log.info("session %s created for tenant %s", sid, tenant)
        return record

    def _check_capacity(self, tenant: str) -> None:
        open_records = [r for r in self._records.values() if r.open]
        mine = [r for r in open_records if r.tenant == tenant]
        if len(mine) + self._starting.get(tenant, 0) >= self.config.max_sessions_per_tenant:
            raise TooManySessionsError(
                f"you have {len(mine)} open sessions (limit {self.config.max_sessions_per_tenant}); "
                "delete one or wait for an idle one to be closed", self._retry_after(mine))
        if len(open_records) + sum(self._starting.values()) >= self.config.max_sessions:
            raise TooManySessionsError(
                f"the server is at its limit of {self.config.max_sessions} open sessions; "
                "retry later", self._retry_after(open_records))

    def _retry_after(self, candidates: list[SessionRecord]) -> int:
        """Seconds until the most idle of ``candidates`` would be culled, else the default."""
        idle_limit = self.config.idle_timeout_s
        idle = [time.monotonic() - r.last_active for r in candidates if not r.lock.locked()]
        if not idle_limit or not idle:
            return self.config.retry_after_s
        return max(1, min(3600, math.ceil(idle_limit - max(idle))))

    def get(self, tenant: str, sid: str) -> SessionRecord:
        """The tenant's session ``sid`` (open or closed); 404 for anyone else's."""
        record = self._records.get(sid) if isinstance(sid, str) else None
        if record is None or record.tenant != tenant:
            raise SessionNotFoundError(f"no session {sid!r}; list yours with GET /sessions")
        return record

    def sessions_of(self, tenant: str) -> list[SessionRecord]:
        """The tenant's sessions, newest first (closed ones that are still remembered too)."""
        mine = [r for r in self._records.values() if r.tenant == tenant]
        return sorted(mine, key=lambda r: r.created_at, reverse=True)

    def open_count(self) -> int:
        """Open sessions over all tenants."""
        return sum(1 for r in self._records.values() if r.open)

    @contextlib.asynccontextmanager
    async def use(self, record: SessionRecord) -> AsyncIterator[KernelSession]:
        """Hold the session's request lock and yield its live kernel session."""
        self.live(record)
        async with record.lock:
            session = self.live(record)
            record.current = use = _Use()
            record.touch()
            try:
                yield session
            finally:
                record.touch()
                record.current = None
                use.done.set()

    def live(self, record: SessionRecord) -> KernelSession:
        """The record's live kernel session (without taking its lock); 410 once closed."""
        record.touch()
        session = record.session
        if not record.open or session is None or session.closed:
            if record.open:
                self._mark_closed(record, "error")
            raise SessionGoneError(
                f"session {record.id} was closed ({record.closed_reason}); its notebook is still "
                f"available at GET /sessions/{record.id}/notebook. Create a new session to go on.")
        return session

    async def close(self, record: SessionRecord, reason: str) -> None:
        """Shut the kernel down; the record (and the notebook on disk) are kept."""
        if not record.open:
            return
        self._mark_closed(record, reason)
        await self.manager.close(record.id)
        log.info("session %s closed (%s)", record.id, reason)

    async def delete(self, record: SessionRecord) -> None:
        """Forget the session at once; its kernel, files and notebook are removed in the
        background (a polite kernel shutdown takes a moment)."""
        self._records.pop(record.id, None)
        record.closed_reason, record.closed_at, record.session = "deleted", _now_iso(), None
        task = asyncio.create_task(self._dispose(record), name=f"dispose-{record.id}")
        self._disposals.add(task)
        task.add_done_callback(self._disposals.discard)

    async def _dispose(self, record: SessionRecord) -> None:
        try:
            await self.manager.close(record.id)
        finally:
            await asyncio.to_thread(shutil.rmtree, record.directory, True)
        log.info("session %s deleted", record.id)

    def _mark_closed(self, record: SessionRecord, reason: str) -> None:
        record.closed_reason = reason
        record.closed_at = _now_iso()
        record.session = None
        self._closed_order.append(record.id)
        while len(self._closed_order) > self.config.closed_kept:
            self._records.pop(self._closed_order.popleft(), None)

    # -- runs and stopping ------------------------------------------------------------------

    async def run_stoppable(self, record: SessionRecord, work: Coroutine[Any, Any, Any]) -> bool:
        """Run ``work`` as the record's multi-step run; True when it finished, False when
        :meth:`stop` cancelled it. Its errors propagate; cancelling the caller cancels it."""
        task: asyncio.Task[Any] = asyncio.create_task(work, name=f"run-{record.id}")
        record.run = task
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            raise
        finally:
            if record.run is task:
                record.run = None
        if task.cancelled():
            return False
        task.result()
        return True

    async def stop(self, record: SessionRecord) -> StopResult:
        """Stop what runs in the session: a multi-step run (EDA, agent) is cancelled, which
        interrupts its cell; a single cell is interrupted (again while it goes on, for a cell
        that catches KeyboardInterrupt). The session stays usable."""
        grace = self.config.limits.interrupt_grace_s + 5.0
        run = record.run
        if run is not None and not run.done():
            run.cancel()
            await asyncio.wait({run}, timeout=grace)
            return "run"
        use = record.current
        if use is None:
            return "idle"
        session = self.live(record)
        deadline = time.monotonic() + grace
        while not use.done.is_set() and time.monotonic() < deadline:
            await session.interrupt()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(use.done.wait(), 0.5)
        return "cell"

    # -- requests ------------------------------------------------------------------------

    def timeout_for(self, requested: float | None) -> float:
        """The execution timeout to use; a request over the ceiling is refused."""
        if requested is None:
            return self.config.default_timeout_s
        if requested > self.config.max_timeout_s:
            raise BadRequestError(
                f"timeout {requested:g} s is over this server's ceiling of {self.config.max_timeout_s:g} s")
        return requested

    def notebook(self, record: SessionRecord) -> dict[str, Any]:
        """The session's audit notebook: from memory while open, from disk once closed."""
        session = record.session
        if record.open and session is not None and not session.closed:
            return session.audit.notebook()
        try:
            data: dict[str, Any] = json.loads(record.notebook_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise SessionGoneError(f"the notebook of session {record.id} is no longer available") from exc
        return data

    # -- idle culling --------------------------------------------------------------------

    async def _cull_loop(self) -> None:
        idle_limit = self.config.idle_timeout_s
        assert idle_limit
        interval = max(0.2, min(30.0, idle_limit / 4))
        while True:
            await asyncio.sleep(interval)
            try:
                await self.cull_idle()
            except Exception:
                log.exception("idle culling failed")

    async def cull_idle(self) -> list[str]:
        """Close sessions idle past ``idle_timeout_s`` and not in use; return their ids."""
        idle_limit = self.config.idle_timeout_s
        if not idle_limit:
            return []
        now = time.monotonic()
        idle = [r for r in self._records.values()
                if r.open and r.session is not None and not r.lock.locked()
                and now - max(r.last_active, r.session.last_used) > idle_limit]
        for record in idle:
            await self.close(record, "idle")
        return [r.id for r in idle]
