"""The sessions of many tenants over one :class:`SessionManager` and one registry.

**Tenancy.** A tenant sees only its own sessions: another tenant's id is reported as
unknown, never as forbidden. Every kernel operation runs under the session's request
lock, so a request holding it knows that the cell running in the kernel is its own
(which is what makes interrupting on a client disconnect safe).

**Records** live in the registry (:mod:`.registry`: SQLite in the session directory,
or PostgreSQL shared by several replicas), not in process memory: after a restart the
same token sees the same sessions, and using one resumes it through
``manager.session(id)`` (the same notebook goes on; variables come back by the recovery
policy, ``replay`` by default). Routes and the page use only this record API
(:meth:`SessionService.sessions_of`, :meth:`~SessionService.get`,
:meth:`~SessionService.use`, :meth:`~SessionService.notebook` ...).

**Dormant conversations** (:mod:`.dormancy`). An idle session is put to sleep, not
closed: ``manager.close(id, reason="idle")`` snapshots the namespace and stops the
kernel, and the conversation stays listed as ``dormant`` (when and why), its files and
notebook readable. Its next use wakes it, on whichever replica serves the request: a
kernel starts and the variables come back (snapshot, else replay), which the result
reports. The session limits count live sessions; ``max_stored_per_tenant`` and
``max_stored_mb_per_tenant`` bound what a tenant keeps, live and dormant; ``DELETE``
purges a conversation with its files. An orderly stop puts this replica's sessions to
sleep too (reason ``shutdown``).

**Lifecycle.** The manager owns every kernel; this service only decides. One
housekeeping pass (:meth:`SessionService.housekeep`) writes heartbeats and last-use
times in batches, lets go of sessions another replica took over, and puts idle ones to
sleep. The manager's own culler is not started here: there is one culler.

**Replicas.** A replica that gets a request for a session it holds no live object for
claims it in the registry, then resumes it (with a gateway, it reattaches to the kernel
id in the registry) or wakes it, and becomes its owner. Going dormant is fenced in the
registry (``sleeping_since``): while the owner saves a namespace, no other replica
starts a kernel on that conversation; it waits, and takes over the sleep of a replica
that died in it. A replica that finds it no longer owns a session lets go of it with
``manager.detach(id)``, which never stops a gateway kernel, and never culls a kernel
another replica owns. Sessions of a replica whose heartbeat stopped longer than
``replica_lease_s`` ago may be put to sleep by any other. The files of a deleted
session are removed by every replica that held a kernel in them, after closing it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import re
import secrets
import shutil
import socket
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, Literal

from ..frontend.sessions import kernel_backend
from ..kernels import KernelSession, SessionManager
from ..kernels.conversation import FileMode, UndoReport, directory_name, enable_checkpoints
from .config import ServerConfig
from .dormancy import directory_bytes, wake_reason
from .exceptions import (
    BadRequestError,
    InvalidSessionIdError,
    RegistryError,
    SessionExistsError,
    SessionGoneError,
    SessionNotFoundError,
    SessionUnavailableError,
    TooManySessionsError,
)
from .records import SessionRecord, Use
from .registry import Registry, SessionRow, database_url

log = logging.getLogger(__name__)


_FORK_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_MIB = 1024 * 1024
_REMOVE_ATTEMPTS = 5  # passes over a deleted session's directory before it is given up on
_SLEEP_POLL_S = 0.1  # how often a request waiting out another replica's sleep looks again

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
        self.manager = SessionManager(config.root_dir, limits=config.limits, pool_size=config.pool_size,
                                      backend=kernel_backend(config.kernel_settings),
                                      recovery=config.recovery)
        # Pool kernels start for nobody: with kernels started as each tenant's own gateway
        # user, or inside each tenant's CPU budget, none could ever be handed out.
        if self.manager.backend.kernels_differ_by_owner(config.limits):
            self.manager.pool_size = 0
        self.registry = Registry(database_url(config.database_url, config.root_dir))
        self._records: dict[str, SessionRecord] = {}  # every session this replica has seen, until deleted
        self._starting: dict[str, int] = {}
        self._admit = asyncio.Lock()
        self._background: set[asyncio.Task[Any]] = set()
        self._disposals: set[asyncio.Task[None]] = set()
        self._housekeeper: asyncio.Task[None] | None = None
        self._closed = False
        self.cell_listeners: list[Callable[[SessionRecord, int], None]] = []
        """Told (record, position) of every cell appended to a live session's notebook here
        (MCP's notebook resource notifications)."""

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
        """Stop background work and put every session this replica holds to sleep: each
        kernel stops, its namespace snapshotted first where the recovery policy asks, and
        the conversations stay listed as dormant (reason ``shutdown``); the next use wakes
        them, here after a restart or on another replica."""
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
        with _logged("marking this replica's sessions as going dormant"):
            await self.registry.begin_sleep_all(self.replica_id, reason="shutdown", at=time.time())
        await self.manager.aclose()
        held = [r for r in self._records.values() if r.open and r.owner == self.replica_id]
        sizes = await asyncio.gather(*(asyncio.to_thread(directory_bytes, r.directory) for r in held))
        for record in self._records.values():
            record.session = None
        with _logged("putting this replica's sessions to sleep"):
            await self.registry.release(self.replica_id,
                                        disk_bytes={r.id: n for r, n in zip(held, sizes, strict=True)})
        await self.registry.aclose()

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """Run ``coro`` in the background, kept referenced and cancelled at close."""
        task = asyncio.create_task(coro, name=name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    # -- sessions ----------------------------------------------------------------------

    async def create(self, tenant: str, *, label: str = "") -> SessionRecord:
        """Start a new session for ``tenant``; 429 (TooManySessionsError) when a limit is
        reached: live sessions, or the conversations and disk a tenant keeps."""
        async with self._admit:
            await self._check_stored(tenant)
            await self._check_capacity(tenant)
            self._starting[tenant] = self._starting.get(tenant, 0) + 1  # holds a slot while starting
        try:
            sid = secrets.token_hex(8)
            record = await self._register(sid, tenant, await self.manager.session(sid, owner=tenant), label)
        finally:
            self._starting[tenant] -= 1  # only now: the row counts from here on
        self._records[sid] = record  # visible only once its kernel is up
        record.touch()
        log.info("session %s created for tenant %s", sid, tenant)
        return record

    async def _register(self, sid: str, tenant: str, session: KernelSession, label: str) -> SessionRecord:
        """The record and registry row of a session just started (closed again if the row
        cannot be written). Its kernel takes checkpoints, for undo, where it can."""
        enable_checkpoints(session)
        record = SessionRecord(sid, tenant, self.config.root_dir / directory_name(sid), label=label,
                               kernel_id=session.kernel_id, owner=self.replica_id, session=session)
        row = SessionRow(sid, tenant, record.directory.name, record.created, record.used_at, label=label,
                         kernel_id=record.kernel_id, owner=self.replica_id)
        try:
            await self.registry.insert(row)
        except BaseException:
            await self.manager.close(sid, reason=None)
            raise
        self._watch(record, session)
        return record

    def _watch(self, record: SessionRecord, session: KernelSession) -> None:
        """Tell :attr:`cell_listeners` of the cells appended to ``session``'s notebook."""

        def appended(index: int) -> None:
            for listener in list(self.cell_listeners):
                listener(record, index)

        session.on_cell(appended)

    # -- undo and branches (kernels/checkpoints.py, kernels/branches.py) ----------------

    async def undo(self, record: SessionRecord, *, to: int | None = None,
                   files: FileMode = "keep") -> UndoReport:
        """Put the session's variables back as they were before its last checkpointed cell
        (or cell ``to``); 409 (CheckpointError) when there is no checkpoint to go back to."""
        async with self.use(record) as session:
            return await session.undo(to, files=files)

    async def fork(self, record: SessionRecord, *, new_id: str | None = None,
                   label: str | None = None) -> SessionRecord:
        """A new session of the same tenant with ``record``'s variables and files as they
        are now (a branch); 400 for an id it cannot use, 409 for one that exists."""
        sid = new_id or secrets.token_hex(8)
        if not _FORK_ID.fullmatch(sid):
            raise InvalidSessionIdError(f"{sid!r} cannot be a session id: use 1 to 64 letters, digits, "
                                        "'-' or '_', starting with a letter or digit")
        tenant = record.tenant
        async with self._admit:
            await self._check_stored(tenant)
            await self._check_capacity(tenant)
            self._starting[tenant] = self._starting.get(tenant, 0) + 1
        try:
            taken = (self.config.root_dir / directory_name(sid)).exists()
            if taken or await self.registry.get(sid) is not None:
                raise SessionExistsError(f"a session {sid!r} exists already; choose another id, or leave "
                                         "it out for a new one")
            async with self.use(record):  # the source is live here, and no request of its runs
                session = await self.manager.fork(record.id, sid)
            new = await self._register(sid, tenant, session, record.label if label is None else label)
        finally:
            self._starting[tenant] -= 1
        self._records[sid] = new
        new.touch()
        log.info("session %s forked from %s for tenant %s", sid, record.id, tenant)
        return new

    async def _check_capacity(self, tenant: str, *, waking: bool = False) -> None:
        """429 when ``tenant`` (or the server) is at its limit of live sessions."""
        mine, total = await self.registry.open_counts(tenant)
        what = "this dormant session can wake" if waking else "you can start another"
        if mine + self._starting.get(tenant, 0) >= self.config.max_sessions_per_tenant:
            raise TooManySessionsError(
                f"you have {mine} live sessions (limit {self.config.max_sessions_per_tenant}); {what} "
                "when one of them goes dormant after being idle, or once you delete one",
                await self._retry_after(tenant))
        if total + sum(self._starting.values()) >= self.config.max_sessions:
            raise TooManySessionsError(
                f"the server is at its limit of {self.config.max_sessions} live sessions; retry later",
                await self._retry_after(None))

    async def _check_stored(self, tenant: str) -> None:
        """429 when ``tenant`` keeps as many conversations, or as much disk, as it may
        (waiting does not help: deleting does)."""
        count, used = await self.registry.stored(tenant)
        count += self._starting.get(tenant, 0)
        limit = self.config.max_stored_per_tenant
        if count >= limit:
            raise TooManySessionsError(
                f"you keep {count} conversations, live and dormant (limit {limit}); delete one you no "
                "longer need (DELETE /sessions/ID removes it with its files) to start another", None)
        mb = self.config.max_stored_mb_per_tenant
        if mb and used >= mb * _MIB:
            raise TooManySessionsError(
                f"your conversations take {used / _MIB:,.0f} MB on disk (limit {mb:,.0f} MB, as measured "
                "when each last went dormant); delete one you no longer need (DELETE /sessions/ID removes "
                "it with its files) to start another", None)

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
        """The tenant's session ``sid`` (live or dormant); 404 for anyone else's. One
        registry lookup; no kernel is started."""
        row = await self.registry.get(sid) if isinstance(sid, str) and sid else None
        if row is None or row.tenant != tenant:
            if row is None and isinstance(sid, str) and sid in self._records:
                self._forget(sid)  # deleted through another replica
            raise SessionNotFoundError(f"no session {sid!r}; list yours with GET /sessions")
        return self._record_for(row)

    async def sessions_of(self, tenant: str) -> list[SessionRecord]:
        """The tenant's sessions, live and dormant, newest first."""
        return [self._record_for(row) for row in await self.registry.of_tenant(tenant)]

    def _record_for(self, row: SessionRow) -> SessionRecord:
        """The one record object of a session (kept until it is deleted), refreshed from ``row``."""
        record = self._records.get(row.id)
        if record is None:
            record = self._records[row.id] = SessionRecord.from_row(row, self.config.root_dir)
        else:
            record.refresh(row)
        return record

    def _forget(self, sid: str) -> None:
        """Drop a session deleted elsewhere; let go of its kernel and files here (see
        :meth:`_let_go`)."""
        record = self._records.pop(sid, None)
        if record is None:
            return
        session = record.mark_deleted()
        if session is not None:
            self.spawn(self._let_go(record, session), f"let-go-{sid}")

    async def _let_go(self, record: SessionRecord, session: KernelSession) -> None:
        """Close this replica's kernel of a session deleted elsewhere, then remove its
        files: until the kernel is closed this replica may still write into its directory
        (a cell's notebook append, the package versions written after start, a snapshot),
        and a removal by the deleting replica that ran meanwhile leaves whatever was
        written during or after it."""
        try:
            await self._release_kernel(record.id, session, owned=True, now=True)
        finally:  # a kernel that failed to close is still no reason to keep the files
            await self._remove_files(record)

    async def _remove_files(self, record: SessionRecord) -> None:
        """Remove a deleted session's directory (its files and notebook). A file written
        while the tree is removed leaves the directory behind (rmtree lists, then removes):
        it is tried again a few times before the directory is given up on, and said so."""
        for attempt in range(_REMOVE_ATTEMPTS):
            await asyncio.to_thread(shutil.rmtree, record.directory, True)
            if not record.directory.exists():
                return
            await asyncio.sleep(0.05 * (attempt + 1))
        log.warning("session %s: its directory %s could not be removed; something still writes there",
                    record.id, record.directory)

    def check_open(self, record: SessionRecord) -> None:
        """404 once the session is deleted. A dormant session passes: its use wakes it."""
        if record.deleted:
            raise SessionNotFoundError(f"session {record.id} was deleted; list yours with GET /sessions")

    @contextlib.asynccontextmanager
    async def use(self, record: SessionRecord) -> AsyncIterator[KernelSession]:
        """Hold the session's request lock and yield its live kernel session (resumed,
        woken or taken over first when this replica holds none)."""
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
        """The record's live kernel session (without taking its lock), resumed or woken
        first when this replica holds none; 404 once deleted."""
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
            return await self._hold(record)

    async def _hold(self, record: SessionRecord) -> KernelSession:
        """Make this replica the holder of the record's live session (under its resuming
        lock): wait out a sleep in progress, wake a dormant conversation (the live limits
        apply) or claim a live one, then start its kernel or reattach to it. The registry
        says who holds it before any kernel starts, so no culler elsewhere can begin to
        put it to sleep meanwhile."""
        deadline = time.monotonic() + self.manager.recovery.snapshot_timeout_s + 30.0
        while True:
            row = await self.registry.get(record.id)
            if row is None:
                self._records.pop(record.id, None)
                record.mark_deleted()
                self.check_open(record)
            assert row is not None
            record.refresh(row)
            if row.sleeping_since is not None:
                await self._wait_for_sleep(row, deadline)
                continue
            if row.dormant:
                if not await self._wake(record, row):
                    continue
            elif not await self.registry.claim(record.id, owner=self.replica_id, kernel_id=row.kernel_id):
                continue
            session = await self._start(record, row)
            if await self.registry.set_kernel(record.id, owner=self.replica_id, kernel_id=session.kernel_id):
                enable_checkpoints(session)
                self._watch(record, session)
                previous = row.owner if row.open else f"nobody: dormant, {row.dormant_reason}"
                record.session, record.owner, record.kernel_id = session, self.replica_id, session.kernel_id
                log.info("session %s resumed on replica %s (owner was %s)", record.id, self.replica_id,
                         previous or "nobody")
                return session
            # Deleted, or taken over, while its kernel started here: let go of it, look again.
            gone = await self.registry.get(record.id) is None
            await self._release_kernel(record.id, session, owned=True, now=True)
            if gone:  # the kernel started here wrote into the deleted directory
                await self._remove_files(record)

    async def _wake(self, record: SessionRecord, row: SessionRow) -> bool:
        """Turn a dormant row live for this replica, within the live-session limits; False
        when another replica woke it first."""
        async with self._admit:
            await self._check_capacity(record.tenant, waking=True)
            if not await self.registry.wake(record.id, owner=self.replica_id, at=time.time()):
                return False
        record.mark_awake(self.replica_id)
        record.touch()
        return True

    async def _start(self, record: SessionRecord, row: SessionRow) -> KernelSession:
        """Start (or reattach to) the kernel of a session this replica now holds; a woken
        one goes back to sleep when its kernel cannot start."""
        woken = row.dormant
        reason = wake_reason(row.dormant_since, row.dormant_reason) if woken else None
        try:
            return await self.manager.session(record.id, attach=None if woken else row.kernel_id,
                                              owner=record.tenant, reason=reason)
        except BaseException:
            if woken:
                with _logged(f"putting session {record.id} back to sleep after a failed wake-up"):
                    await self._sleep_row(record, reason=row.dormant_reason or "idle", expected=None)
            raise

    async def _wait_for_sleep(self, row: SessionRow, deadline: float) -> None:
        """Wait while another replica saves the namespace of a conversation going dormant;
        finish the sleep for a replica that died in it (its snapshot may be incomplete:
        the recovery then replays)."""
        lease_cut = time.time() - self.config.replica_lease_s
        sleeper = row.owner
        if sleeper is not None and sleeper != self.replica_id \
                and not await self.registry.alive(sleeper, lease_cut=lease_cut):
            log.info("session %s: replica %s died putting it to sleep; finishing for it", row.id, sleeper)
            await self.registry.finish_sleep(row.id, owner=sleeper, at=time.time(), disk_bytes=None)
            return
        if time.monotonic() > deadline:
            raise SessionUnavailableError(
                f"session {row.id} is still being put to sleep by replica {sleeper} (its namespace "
                "is being saved); retry in a minute")
        await asyncio.sleep(_SLEEP_POLL_S)

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

    async def sleep(self, record: SessionRecord, reason: str = "idle", *,
                    row: SessionRow | None = None) -> bool:
        """Put a live session to sleep: its kernel is stopped through the manager (the
        namespace snapshotted first), the conversation kept, dormant for ``reason``.
        ``row`` is the registry row the decision was made on (read now when None). False
        when it is in use, or another replica's request, takeover or culler came first."""
        async with record.resuming:
            if record.lock.locked() or not record.open:
                return False
            expected = row if row is not None else await self.registry.get(record.id)
            if expected is None or expected.dormant:
                return False
            return await self._sleep_row(record, reason=reason, expected=expected)

    async def _sleep_row(self, record: SessionRecord, *, reason: str, expected: SessionRow | None) -> bool:
        """The two registry writes of going dormant around the kernel's stop (see
        :meth:`sleep`); ``expected`` None: this replica holds the row already."""
        owner = self.replica_id if expected is None else expected.owner
        sleeping = None if expected is None else expected.sleeping_since
        if not await self.registry.begin_sleep(record.id, me=self.replica_id, reason=reason, at=time.time(),
                                               owner=owner, sleeping_since=sleeping):
            return False
        session, record.session = record.session, None
        try:
            if session is not None:
                await self._release_kernel(record.id, session, owned=owner == self.replica_id, reason=reason)
        finally:
            size = await asyncio.to_thread(directory_bytes, record.directory)
            at = time.time()
            slept = await self.registry.finish_sleep(record.id, owner=self.replica_id, at=at, disk_bytes=size)
        if slept:
            record.mark_dormant(reason, at, size)
            log.info("session %s is dormant (%s; %s on disk)", record.id, reason, f"{size / _MIB:,.1f} MB")
        elif await self.registry.get(record.id) is None:
            # Deleted through another replica while the kernel was stopping here (a snapshot
            # is written on the way): the files are ours to remove.
            self._records.pop(record.id, None)
            record.mark_deleted()
            await self._remove_files(record)
        return slept

    async def delete(self, record: SessionRecord) -> None:
        """Forget the session at once, live or dormant; its kernel, files and notebook are
        removed in the background (a polite kernel shutdown takes a moment)."""
        owned = record.owner == self.replica_id
        self._records.pop(record.id, None)
        session = record.mark_deleted()
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
        """Stop what runs in the session: a multi-step run (EDA, agent) or a background run
        is cancelled, which interrupts its cell; a single cell is interrupted (again while it
        goes on, for a cell that catches KeyboardInterrupt). The session stays usable."""
        grace = self.config.limits.interrupt_grace_s + 5.0
        run = record.run
        if run is not None and not run.done():
            run.cancel()
            await asyncio.wait({run}, timeout=grace)
            return "run"
        background = record.session.runs.active if record.session is not None else None
        if background is not None:  # a background run: cancelled like any run
            await background.cancel()
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
        if self.config.housekeeping_interval_s is not None:
            return self.config.housekeeping_interval_s
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
        """One pass: heartbeat, last-use times written, sessions deleted, taken over or put
        to sleep elsewhere let go of, idle ones put to sleep. Returns the ids put to sleep."""
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
                self._forget(sid)
                continue
            if record.lock.locked() or record.resuming.locked():
                continue
            record.refresh(row)
            if record.session is not None and (row.owner != self.replica_id or row.dormant):
                session, record.session = record.session, None
                log.info("session %s was taken over by replica %s; letting go", sid,
                         row.owner or "nobody (it is dormant)")
                await self._release_kernel(sid, session, owned=False)

    async def cull_idle(self) -> list[str]:
        """Put to sleep the sessions idle past ``idle_timeout_s`` and not in use that this
        replica may (its own, those nobody holds, a dead replica's); return their ids."""
        idle_limit = self.config.idle_timeout_s
        if not idle_limit:
            return []
        now = time.time()
        rows = await self.registry.idle(now - idle_limit, me=self.replica_id,
                                        lease_cut=now - self.config.replica_lease_s)
        culled = []
        for row in rows:
            record = self._record_for(row)
            if record.open and self._is_due(record, idle_limit) and await self.sleep(record, "idle", row=row):
                culled.append(record.id)
        return culled

    def _is_due(self, record: SessionRecord, idle_limit: float) -> bool:
        if record.lock.locked() or record.resuming.locked() or record.attached:
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
