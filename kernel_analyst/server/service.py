"""The sessions of many tenants over one :class:`SessionManager` and one registry.

**Tenancy.** A tenant sees only its own sessions: another tenant's id is reported as
unknown, never as forbidden. Every kernel operation runs under the session's request
lock, so a request holding it knows that the cell running in the kernel is its own
(which is what makes interrupting on a client disconnect safe). Closed sessions
(deleted ones aside) keep their record, so their audit notebook stays downloadable.

**Records** live in the registry (:mod:`.registry`: SQLite in the session directory,
or PostgreSQL shared by several replicas), not in process memory: after a restart the
same token sees the same sessions, and using one resumes it through
``manager.session(id)`` (the same notebook goes on; variables come back by the recovery
policy, ``replay`` by default). Routes and the page use only this record API
(:meth:`SessionService.sessions_of`, :meth:`~SessionService.get`,
:meth:`~SessionService.use`, :meth:`~SessionService.notebook` ...).

**Lifecycle.** The manager owns every kernel; this service only decides. One
housekeeping pass (:meth:`SessionService.housekeep`) writes heartbeats and last-use
times in batches, lets go of sessions another replica took over, and culls idle ones
through ``manager.close(id, reason="idle")``, which snapshots the namespace first. The
manager's own culler is not started here: there is one culler.

**Replicas.** A replica that gets a request for a session it holds no live object for
resumes it (with a gateway, it reattaches to the kernel id in the registry) and becomes
its owner. A replica that finds it no longer owns a session lets go of it with
``manager.detach(id)``, which never stops a gateway kernel, and never culls or closes a
kernel another replica owns. Sessions of a replica whose heartbeat stopped longer than
``replica_lease_s`` ago may be culled by any other.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import secrets
import shutil
import socket
import time
from collections.abc import AsyncIterator, Coroutine
from typing import Any, Literal

from ..frontend.sessions import kernel_backend
from ..kernels import KernelSession, SessionManager
from ..kernels.manager import directory_name
from .config import ServerConfig
from .exceptions import (
    BadRequestError,
    RegistryError,
    SessionGoneError,
    SessionNotFoundError,
    TooManySessionsError,
)
from .records import SessionRecord, Use
from .registry import Registry, SessionRow, database_url

log = logging.getLogger(__name__)


StopResult = Literal["run", "cell", "idle"]
"""What :meth:`SessionService.stop` stopped: a multi-step run, a cell, or nothing."""


def new_replica_id() -> str:
    """An id for this process among the replicas on one registry."""
    return f"{socket.gethostname()[:80]}-{os.getpid()}-{secrets.token_hex(3)}"


class SessionService:
    """Tenants' sessions with limits, idle culling, kept audit trails and durable records.

    Use as an async context manager; nothing starts (or connects) in the constructor.
    """

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.replica_id = new_replica_id()
        """This process's id in the registry (the owner of the sessions it holds live)."""
        backend = kernel_backend(config.kernel_settings)
        # Pool kernels start for nobody: with kernels started as each tenant's own gateway
        # user, none could ever be handed out.
        pool_size = 0 if backend is not None and backend.kernels_per_owner else config.pool_size
        self.manager = SessionManager(config.root_dir, limits=config.limits, pool_size=pool_size,
                                      backend=backend, recovery=config.recovery)
        self.registry = Registry(database_url(config.database_url, config.root_dir))
        self._records: dict[str, SessionRecord] = {}  # open sessions this replica has seen
        self._starting: dict[str, int] = {}
        self._admit = asyncio.Lock()
        self._background: set[asyncio.Task[Any]] = set()
        self._disposals: set[asyncio.Task[None]] = set()
        self._housekeeper: asyncio.Task[None] | None = None
        self._closed = False

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> SessionService:
        """Open the registry, start the session manager and the housekeeping pass."""
        await self.registry.start()
        try:
            await self.registry.heartbeat(self.replica_id)
            await self.manager.start()
        except BaseException:
            await self.registry.aclose()
            raise
        self._housekeeper = asyncio.create_task(self._housekeeping_loop(), name="server-housekeeping")
        return self

    async def __aenter__(self) -> SessionService:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop background work and close every kernel, each snapshotted first where the
        recovery policy asks (notebooks stay on disk). Open sessions stay open in the
        registry, held by nobody: the next use resumes them."""
        if self._closed:
            return
        self._closed = True
        if self._housekeeper is not None:
            self._housekeeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._housekeeper
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await asyncio.gather(*self._disposals, return_exceptions=True)  # never cut a shutdown short
        with _logged("writing last-use times at shutdown"):
            await self._flush_used()
        with _logged("letting go of sessions other replicas took over"):
            await self._reconcile()  # the manager's close below must only close our own kernels
        await self.manager.aclose()
        for record in self._records.values():
            record.session = None
        with _logged("releasing this replica's sessions"):
            await self.registry.release(self.replica_id)
        await self.registry.aclose()

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
            await self._check_capacity(tenant)
            self._starting[tenant] = self._starting.get(tenant, 0) + 1  # holds a slot while starting
        try:
            sid = secrets.token_hex(8)
            session = await self.manager.session(sid, owner=tenant)
            record = SessionRecord(sid, tenant, self.config.root_dir / directory_name(sid), label=label,
                                   kernel_id=session.kernel_id, owner=self.replica_id, session=session)
            row = SessionRow(sid, tenant, record.directory.name, record.created, record.used_at, label=label,
                             kernel_id=record.kernel_id, owner=self.replica_id)
            try:
                await self.registry.insert(row)
            except BaseException:
                await self.manager.close(sid, reason=None)
                raise
        finally:
            self._starting[tenant] -= 1  # only now: the row counts from here on
        self._records[sid] = record  # visible only once its kernel is up
        record.touch()
        log.info("session %s created for tenant %s", sid, tenant)
        return record

    async def _check_capacity(self, tenant: str) -> None:
        mine, total = await self.registry.open_counts(tenant)
        if mine + self._starting.get(tenant, 0) >= self.config.max_sessions_per_tenant:
            raise TooManySessionsError(
                f"you have {mine} open sessions (limit {self.config.max_sessions_per_tenant}); "
                "delete one or wait for an idle one to be closed", await self._retry_after(tenant))
        if total + sum(self._starting.values()) >= self.config.max_sessions:
            raise TooManySessionsError(
                f"the server is at its limit of {self.config.max_sessions} open sessions; "
                "retry later", await self._retry_after(None))

    async def _retry_after(self, tenant: str | None) -> int:
        """Seconds until the most idle open session (of ``tenant``, or of all) would be
        culled, else the default."""
        idle_limit = self.config.idle_timeout_s
        if not idle_limit:
            return self.config.retry_after_s
        candidates = [self._record_for(row) for row in await self.registry.open_rows(tenant)]
        idle = [time.monotonic() - r.last_active for r in candidates if not r.lock.locked()]
        if not idle:
            return self.config.retry_after_s
        return max(1, min(3600, math.ceil(idle_limit - max(idle))))

    async def get(self, tenant: str, sid: str) -> SessionRecord:
        """The tenant's session ``sid`` (open or closed); 404 for anyone else's. One
        registry lookup; no kernel is started."""
        row = await self.registry.get(sid) if isinstance(sid, str) and sid else None
        if row is None or row.tenant != tenant:
            if row is None and isinstance(sid, str) and sid in self._records:
                self._forget(sid, deleted=True)  # deleted through another replica
            raise SessionNotFoundError(f"no session {sid!r}; list yours with GET /sessions")
        return self._record_for(row)

    async def sessions_of(self, tenant: str) -> list[SessionRecord]:
        """The tenant's sessions, newest first (closed ones that are still remembered too)."""
        return [self._record_for(row) for row in await self.registry.of_tenant(tenant)]

    def _record_for(self, row: SessionRow) -> SessionRecord:
        """The one record object of a session (cached while open), refreshed from ``row``."""
        record = self._records.get(row.id)
        if record is None:
            record = SessionRecord.from_row(row, self.config.root_dir)
            if record.open:
                self._records[row.id] = record
            return record
        record.refresh(row)
        if not record.open:
            self._forget(row.id)  # closed through another replica
        return record

    def _forget(self, sid: str, *, deleted: bool = False) -> None:
        """Drop a session that is closed or deleted elsewhere; let go of its kernel here
        (and, once ``deleted``, of its files: see :meth:`_let_go`)."""
        record = self._records.pop(sid, None)
        if record is not None and record.session is not None:
            session, record.session = record.session, None
            self.spawn(self._let_go(record, session, deleted=deleted), f"let-go-{sid}")

    async def _let_go(self, record: SessionRecord, session: KernelSession, *, deleted: bool) -> None:
        """Close this replica's kernel of a session closed or deleted elsewhere. A deleted
        session's files are removed here too, after the kernel is closed: until then this
        replica may still have written into its directory (a cell's notebook append, the
        package versions written after start, a snapshot), and a removal by the deleting
        replica that ran meanwhile leaves whatever was written during or after it."""
        await self._release_kernel(record.id, session, owned=True, now=deleted)
        if deleted:
            await self._remove_files(record)

    async def _remove_files(self, record: SessionRecord) -> None:
        """Remove a deleted session's directory (its files and notebook)."""
        await asyncio.to_thread(shutil.rmtree, record.directory, True)

    def check_open(self, record: SessionRecord) -> None:
        """410 (SessionGoneError) once the session is closed."""
        if not record.open:
            raise SessionGoneError(
                f"session {record.id} was closed ({record.closed_reason}); its notebook is still "
                f"available at GET /sessions/{record.id}/notebook. Create a new session to go on.")

    @contextlib.asynccontextmanager
    async def use(self, record: SessionRecord) -> AsyncIterator[KernelSession]:
        """Hold the session's request lock and yield its live kernel session (resumed or
        taken over first when this replica holds none)."""
        self.check_open(record)
        async with record.lock:
            session = await self._live(record)
            record.current = use = Use()
            record.touch()
            try:
                yield session
            finally:
                record.touch()
                record.current = None
                use.done.set()

    async def live(self, record: SessionRecord) -> KernelSession:
        """The record's live kernel session (without taking its lock), resumed first when
        this replica holds none; 410 once closed."""
        self.check_open(record)
        record.touch()
        return await self._live(record)

    async def _live(self, record: SessionRecord) -> KernelSession:
        async with record.resuming:
            self.check_open(record)
            session = record.session
            if session is not None and not session.closed and record.owner == self.replica_id:
                return session
            if session is not None:  # another replica took it over since we held it
                record.session = None
                await self._release_kernel(record.id, session, owned=False)
            session = await self.manager.session(record.id, attach=record.kernel_id, owner=record.tenant)
            kernel_id = session.kernel_id
            if not await self.registry.claim(record.id, owner=self.replica_id, kernel_id=kernel_id):
                # Closed or deleted (through another replica, or culled) while it resumed.
                row = await self.registry.get(record.id)
                await self._release_kernel(record.id, session, owned=True, now=row is None)
                if row is None:  # the kernel started here wrote into the deleted directory
                    await self._remove_files(record)
                record.mark_closed((row.closed_reason or "closed") if row is not None else "deleted")
                self._records.pop(record.id, None)
                self.check_open(record)
            previous = record.owner
            record.session, record.owner, record.kernel_id = session, self.replica_id, kernel_id
            log.info("session %s resumed on replica %s (owner was %s)", record.id, self.replica_id,
                     previous or "nobody")
            return session

    async def _release_kernel(self, sid: str, session: KernelSession, *, owned: bool,
                              reason: str | None = None, now: bool = False) -> None:
        """Through the manager: close a kernel this replica owns (``reason`` and ``now``
        as for ``manager.close``); only detach from one another replica owns."""
        if self.manager.get(sid) is not session:
            return  # the manager has let go of it already
        if owned:
            await self.manager.close(sid, reason=reason, now=now)
        else:
            await self.manager.detach(sid)

    async def close(self, record: SessionRecord, reason: str) -> None:
        """Close the session; its kernel, if this replica owns it, is shut down through the
        manager (``idle`` snapshots the namespace first). The record and the notebook on
        disk are kept."""
        if not record.open:
            return
        owned = record.owner == self.replica_id
        session = record.mark_closed(reason)
        self._records.pop(record.id, None)
        try:
            await self.registry.close(record.id, reason=reason, at=record.closed or time.time(),
                                      keep_closed=self.config.closed_kept)
        finally:
            if session is not None:
                await self._release_kernel(record.id, session, owned=owned, reason=reason)
                if await self.registry.get(record.id) is None:
                    # Deleted through another replica while the kernel was closing here
                    # (a snapshot is written on the way): the files are ours to remove.
                    await self._remove_files(record)
        log.info("session %s closed (%s)", record.id, reason)

    async def delete(self, record: SessionRecord) -> None:
        """Forget the session at once; its kernel, files and notebook are removed in the
        background (a polite kernel shutdown takes a moment)."""
        owned = record.owner == self.replica_id
        self._records.pop(record.id, None)
        session = record.mark_closed("deleted")
        await self.registry.delete(record.id)
        task = asyncio.create_task(self._dispose(record, session, owned), name=f"dispose-{record.id}")
        self._disposals.add(task)
        task.add_done_callback(self._disposals.discard)

    async def _dispose(self, record: SessionRecord, session: KernelSession | None, owned: bool) -> None:
        try:
            if session is not None:
                await self._release_kernel(record.id, session, owned=owned, now=True)
        finally:
            # When another replica still holds a kernel here, it removes the files again
            # once it has closed that kernel (it may write into them until then).
            await self._remove_files(record)
        log.info("session %s deleted", record.id)

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
        use, session = record.current, record.session
        if use is None or session is None:
            return "idle"
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
        """The session's audit notebook: from memory while this replica holds it live,
        else from disk."""
        session = record.session
        if record.open and session is not None and not session.closed and record.owner == self.replica_id:
            return session.audit.notebook()
        try:
            data: dict[str, Any] = json.loads(record.notebook_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise SessionGoneError(f"the notebook of session {record.id} is no longer available") from exc
        return data

    # -- housekeeping: heartbeats, last-use times, owners, idle culling ----------------------

    def _housekeeping_interval(self) -> float:
        candidates = [30.0, self.config.replica_lease_s / 4]
        if self.config.idle_timeout_s:
            candidates.append(self.config.idle_timeout_s / 4)
        return max(0.2, min(candidates))

    async def _housekeeping_loop(self) -> None:
        interval = self._housekeeping_interval()
        while True:
            await asyncio.sleep(interval)
            try:
                await self.housekeep()
            except Exception:
                log.exception("session housekeeping failed")

    async def housekeep(self) -> list[str]:
        """One pass: heartbeat, last-use times written, sessions closed, deleted or taken
        over elsewhere let go of, idle ones culled. Returns the ids culled."""
        await self.registry.heartbeat(self.replica_id)
        await self._flush_used()
        await self._reconcile()
        return await self.cull_idle()

    async def _flush_used(self) -> None:
        due = {sid: r.used_at for sid, r in self._records.items() if r.used_at > r.flushed_at}
        await self.registry.touch(due)
        for sid, used in due.items():
            record = self._records.get(sid)
            if record is not None:
                record.flushed_at = max(record.flushed_at, used)

    async def _reconcile(self) -> None:
        """Let go of what the registry says is no longer ours to hold (a request in
        progress is left to finish; the next pass sees it again)."""
        rows = await self.registry.rows(self._records)
        for sid, record in list(self._records.items()):
            row = rows.get(sid)
            if row is None:
                self._forget(sid, deleted=True)
                continue
            if record.lock.locked() or record.resuming.locked():
                continue
            record.refresh(row)
            if not record.open:
                self._forget(sid)
            elif record.session is not None and row.owner != self.replica_id:
                session, record.session = record.session, None
                log.info("session %s was taken over by replica %s; letting go", sid, row.owner)
                await self._release_kernel(sid, session, owned=False)

    async def cull_idle(self) -> list[str]:
        """Close sessions idle past ``idle_timeout_s`` and not in use that this replica may
        close (its own, and those nobody holds); return their ids."""
        idle_limit = self.config.idle_timeout_s
        if not idle_limit:
            return []
        now = time.time()
        rows = await self.registry.idle(now - idle_limit, me=self.replica_id,
                                        lease_cut=now - self.config.replica_lease_s)
        culled = []
        for row in rows:
            record = self._record_for(row)
            if record.open and self._is_due(record, idle_limit):
                await self.close(record, "idle")
                culled.append(record.id)
        return culled

    def _is_due(self, record: SessionRecord, idle_limit: float) -> bool:
        if record.lock.locked() or record.resuming.locked():
            return False
        last = record.last_active
        session = record.session
        if session is not None and not session.closed:
            if record.owner != self.replica_id or session.busy:
                return False
            last = max(last, session.last_used)
        return time.monotonic() - last > idle_limit


@contextlib.contextmanager
def _logged(what: str) -> Any:
    """A registry failure at shutdown is logged, not raised: the kernels still get closed."""
    try:
        yield
    except RegistryError:
        log.exception("session registry: %s failed", what)


__all__ = ["SessionRecord", "SessionService", "StopResult", "new_replica_id"]
