"""SessionManager: conversation id -> KernelSession, with a warm pool and idle culling.

The manager owns the whole life of a conversation's session: creation (or resumption of
a conversation already on disk under ``root_dir``), the warm pool, idle culling, and
closing, which snapshots the namespace first when the recovery policy asks for it.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._clock import utcnow
from ..exceptions import CheckpointError, KernelAnalystError, SessionClosedError
from ..launch import (
    DEFAULT_PRELOAD,
    KernelBackend,
    KernelEnvironment,
    KernelRequest,
    LocalBackend,
    RunningKernel,
)
from ..limits import Limits
from ..recovery import RecoveryPolicy
from ..trail import repair_notebook
from . import keeping
from .keeping import DiscardReport, KeepReport
from .session import KernelSession

log = logging.getLogger(__name__)

_SAFE_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
POOL_PRELOAD = DEFAULT_PRELOAD
_POOL_DIR = ".pool"
_REFILL_DELAY_S = 0.25


def directory_name(conversation_id: str) -> str:
    """A directory name for a conversation id: the id itself when it is plainly safe,
    else a slug plus a hash (ids are arbitrary strings from outside)."""
    if not isinstance(conversation_id, str) or not conversation_id:
        raise ValueError("conversation id must be a non-empty string")
    if _SAFE_ID.match(conversation_id) and conversation_id not in (".", ".."):
        return conversation_id
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", conversation_id).strip("-")[:40] or "session"
    digest = hashlib.sha256(conversation_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{slug}-{digest}"


class SessionManager:
    """Keeps one persistent kernel per conversation under ``root_dir``.

    Use as an async context manager; nothing starts before ``__aenter__``::

        async with SessionManager("runs", limits=Limits(timeout_s=30), pool_size=2) as m:
            s = await m.session("conversation-1")
            ex = await s.execute("1 + 1")
    """

    def __init__(
        self,
        root_dir: str | os.PathLike[str],
        *,
        limits: Limits | None = None,
        pool_size: int = 0,
        backend: KernelBackend | None = None,
        environment: KernelEnvironment | None = None,
        idle_timeout_s: float | None = None,
        max_sessions: int | None = None,
        pool_concurrency: int = 2,
        recovery: str | RecoveryPolicy | None = None,
    ) -> None:
        """
        Args:
            root_dir: where each conversation gets its directory (notebook, files).
            limits: limits for every kernel.
            pool_size: kernels kept started ahead of need (pandas and pyplot loaded).
            backend: where kernels run (local processes by default; a gateway).
            environment: which Python the kernels run.
            idle_timeout_s: close sessions idle this long (their notebooks stay).
            max_sessions: refuse new sessions beyond this many open ones.
            pool_concurrency: pool kernels started at once.
            recovery: ``"replay"`` (or a :class:`RecoveryPolicy`) brings a conversation's
                variables back after any loss: kernel death, restart, cull, or a new
                manager on the same ``root_dir``; ``"none"`` (the default) does not.
        """
        self.root_dir = Path(root_dir).absolute()
        self.limits = limits or Limits()
        self.pool_size = max(0, pool_size)
        self.environment = environment or KernelEnvironment()
        self.idle_timeout_s = idle_timeout_s
        self.max_sessions = max_sessions
        self.recovery = RecoveryPolicy.of(recovery)
        self._backend = backend
        self._sessions: dict[str, KernelSession] = {}
        self._creating: dict[str, asyncio.Lock] = {}
        self._pool: list[tuple[RunningKernel, Path]] = []
        self._pool_tasks: set[asyncio.Task[None]] = set()
        self._closing: set[asyncio.Future[None]] = set()
        self._pool_semaphore = asyncio.Semaphore(max(1, pool_concurrency))
        self._culler: asyncio.Task[None] | None = None
        self._started = False
        self._closed = False
        self.isolation = ""
        """The isolation level in force (``auto`` resolved), set by :meth:`start`."""
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop the manager was started on (its kernels' sockets belong to it)."""
        return self._loop

    @property
    def backend(self) -> KernelBackend:
        """The backend that starts kernels (local by default)."""
        if self._backend is None:
            self._backend = LocalBackend()
        return self._backend

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> SessionManager:
        """Create the root directory, check the isolation level, start pool and culler."""
        if self._started:
            return self
        self._loop = asyncio.get_running_loop()
        self.root_dir.mkdir(parents=True, exist_ok=True)
        self.isolation = self.backend.resolved_isolation(self.limits)
        log.info("session manager at %s (backend=%s, isolation=%s)",
                 self.root_dir, self.backend.name, self.isolation)
        self._started = True
        self.backend.prepare(KernelRequest(workdir=self.root_dir, limits=self.limits,
                                           environment=self.environment))
        self._refill_pool()
        if self.idle_timeout_s:
            self._culler = asyncio.create_task(self._cull_loop(), name="kernel-culler")
        return self

    async def __aenter__(self) -> SessionManager:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every session and pool kernel; no kernel process is left behind."""
        if self._closed:
            return
        self._closed = True
        if self._culler is not None:
            self._culler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._culler
        for task in list(self._pool_tasks):
            task.cancel()
        await asyncio.gather(*self._pool_tasks, return_exceptions=True)
        await self.close_all()
        await asyncio.gather(*self._closing, return_exceptions=True)
        pool, self._pool = self._pool, []
        await asyncio.gather(*(k.shutdown(now=True) for k, _ in pool), return_exceptions=True)
        for _, path in pool:
            shutil.rmtree(path, ignore_errors=True)
        await self.backend.aclose()

    # -- sessions ------------------------------------------------------------------------

    async def session(self, conversation_id: str, *, attach: str | None = None,
                      owner: str | None = None, reason: str | None = None) -> KernelSession:
        """The conversation's session, created (with its kernel) on first use. A
        conversation already on disk under ``root_dir`` is resumed: the same notebook
        goes on, and its variables come back by the recovery policy, or with the kernel
        itself when ``attach`` names one still running on the backend (a gateway).
        ``owner`` says who its kernels run for (a tenant: a gateway starts them as that
        tenant's user). ``reason`` says why a conversation is resumed, in its recovery
        report (default ``conversation reopened``; a culled, dormant conversation that a
        service wakes says so)."""
        self._check_open()
        existing = self._sessions.get(conversation_id)
        if existing is not None and not existing.closed:
            return existing
        lock = self._creating.setdefault(conversation_id, asyncio.Lock())
        async with lock:
            existing = self._sessions.get(conversation_id)
            if existing is not None and not existing.closed:
                return existing
            if self.max_sessions is not None and len(self._sessions) >= self.max_sessions:
                raise KernelAnalystError(
                    f"{len(self._sessions)} sessions are open (max_sessions={self.max_sessions}); "
                    "close one first")
            created = await self._create(conversation_id, attach, owner, reason)
            created.manager = self
            self._sessions[conversation_id] = created
            return created

    async def fork(self, source_id: str, new_id: str) -> KernelSession:
        """A new, independent conversation ``new_id`` with the variables and files of the
        open conversation ``source_id`` as they are now (``conversation/branches.py``)."""
        self._check_open()
        source = self.get(source_id)
        if source is None:
            raise SessionClosedError(f"conversation {source_id!r} is not open; open it with "
                                     "manager.session(id) first")
        lock = self._creating.setdefault(new_id, asyncio.Lock())
        async with lock:
            if self.get(new_id) is not None:
                raise KernelAnalystError(f"conversation {new_id!r} is already open; choose another id")
            if self.max_sessions is not None and len(self._sessions) >= self.max_sessions:
                raise KernelAnalystError(
                    f"{len(self._sessions)} sessions are open (max_sessions={self.max_sessions}); "
                    "close one first")
            created = await source.branch(new_id, self.root_dir / directory_name(new_id))
            created.manager = self
            self._sessions[new_id] = created
            return created

    async def keep(self, branch_id: str, *, remove: bool = True, into: str | None = None) -> KeepReport:
        """Make the branch ``branch_id`` its parent conversation's line: the parent takes its
        variables, files and cells (``conversation/keeping.py``; its own cells since the fork
        stay in the trail, marked abandoned), and the branch is closed, its directory removed
        (left, its notebook marked ``kept_into``, when ``remove`` is false). The parent's
        other branches are untouched. ``into`` names the parent expected (CheckpointError
        when it is another). A branch or parent that is not open is opened first."""
        self._check_open()
        branch = await self._existing(branch_id)
        parent_id = self._parent_of(branch)
        if into is not None and into != parent_id:
            raise CheckpointError(f"conversation {branch_id!r} is a branch of {parent_id!r}, not of {into!r}")
        parent = await self._existing(parent_id, what=f"the parent of branch {branch_id!r}")
        report = await parent.adopt(branch)
        report.branch_removed = remove
        await self._end_branch(branch, remove=remove, kept_into=parent_id)
        return report

    async def discard(self, branch_id: str, *, remove: bool = True,
                      record_cells: bool = False) -> DiscardReport:
        """Close the branch ``branch_id`` and remove its directory (left, its notebook
        marked ``discarded``, when ``remove`` is false). Its parent's notebook gets a
        ``discarded`` marker when the parent is open here (with ``record_cells``, the
        branch's own cells too, marked abandoned: every attempt stays in the audit trail)."""
        self._check_open()
        branch = await self._existing(branch_id)
        parent_id = self._parent_of(branch)
        parent = self.get(parent_id)
        cells = len(branch.audit.cells) - keeping.branch_line(branch.audit.cells, parent_id).own_start
        if parent is not None:
            cells = await parent.note_discarded(branch, record_cells=record_cells)
        await self._end_branch(branch, remove=remove, kept_into=None)
        return DiscardReport(branch_id, parent_id, cells, recorded=parent is not None, removed=remove)

    async def _existing(self, conversation_id: str, *, what: str = "") -> KernelSession:
        """An open session of a conversation that exists (opened from disk if need be);
        CheckpointError for one that does not."""
        found = self.get(conversation_id)
        if found is not None:
            return found
        if not _is_conversation(self.root_dir / directory_name(conversation_id), conversation_id):
            named = f"{conversation_id!r}{f' ({what})' if what else ''}"
            raise CheckpointError(f"there is no conversation {named} under {self.root_dir}")
        return await self.session(conversation_id)

    @staticmethod
    def _parent_of(branch: KernelSession) -> str:
        parent = branch.branch_info.parent if branch.branch_info is not None else \
            keeping.parent_of(branch.audit.metadata)
        if parent is None:
            raise CheckpointError(f"conversation {branch.id!r} is not a branch (it was not made by fork)")
        return parent

    async def _end_branch(self, branch: KernelSession, *, remove: bool, kept_into: str | None) -> None:
        """Close a kept or discarded branch; remove its directory, or mark its notebook."""
        if not remove:
            ended = {"kept_into": kept_into} if kept_into is not None else {"discarded": True}
            branch.audit.update_metadata(**ended, ended_at=utcnow())
        await self.close(branch.id, reason=None, now=True)
        if remove:
            await asyncio.to_thread(shutil.rmtree, branch.directory, True)

    async def _create(self, conversation_id: str, attach: str | None = None,
                      owner: str | None = None, reason: str | None = None) -> KernelSession:
        directory = self.root_dir / directory_name(conversation_id)
        resume = _is_conversation(directory, conversation_id)
        # A pool kernel runs for nobody: never hand it to an owner whose kernels differ.
        differ = self.backend.kernels_differ_by_owner(self.limits)
        pooled = not (resume and attach) and (owner is None or not differ)
        kernel = await self._take_pooled(directory) if pooled else None
        if directory.exists() and not resume:
            _archive_notebook(directory)
        session = KernelSession(conversation_id, directory=directory, backend=self.backend,
                                limits=self.limits, environment=self.environment,
                                recovery=self.recovery, owner=owner)
        try:
            await session.start(kernel, resume=resume, attach=attach, reason=reason)
        except BaseException:
            if kernel is not None:
                await kernel.shutdown(now=True)
            raise
        finally:
            # A starting kernel takes a core for most of a second: let the adopted kernel
            # answer its first cells before the pool competes with it.
            asyncio.get_running_loop().call_later(_REFILL_DELAY_S, self._refill_pool)
        return session

    def get(self, conversation_id: str) -> KernelSession | None:
        """The open session for ``conversation_id``, or None (never creates one)."""
        found = self._sessions.get(conversation_id)
        return found if found is not None and not found.closed else None

    def list(self) -> list[str]:
        """Ids of the open sessions."""
        return [sid for sid, s in self._sessions.items() if not s.closed]

    def __contains__(self, conversation_id: object) -> bool:
        return isinstance(conversation_id, str) and self.get(conversation_id) is not None

    async def close(self, conversation_id: str, *, reason: str | None = "closed", now: bool = False) -> bool:
        """Shut down a conversation's kernel (its notebook and files stay on disk), after
        snapshotting its namespace when the recovery policy asks for snapshots (not
        with ``reason=None``: the conversation is being deleted). ``now`` skips the
        kernel's polite shutdown. Returns False if there was no such open session."""
        session = self._sessions.pop(conversation_id, None)
        if session is None:
            return False
        # A task of its own, awaited through a shield: a caller that is cancelled (the
        # culler, at shutdown) cannot leave a kernel half closed, and aclose() waits for it.
        closing = asyncio.ensure_future(session.close(save=reason, now=now))
        self._closing.add(closing)
        closing.add_done_callback(self._closing.discard)
        await asyncio.shield(closing)
        return True

    async def detach(self, conversation_id: str) -> bool:
        """Forget a conversation's session without stopping its kernel (another process
        has taken it over); False if there was no such open session."""
        session = self._sessions.pop(conversation_id, None)
        if session is None:
            return False
        await session.detach()
        return True

    async def close_all(self, *, reason: str = "shutdown") -> None:
        """Close every open session (snapshots first, as :meth:`close`)."""
        sessions, self._sessions = list(self._sessions.values()), {}
        await asyncio.gather(*(s.close(save=reason) for s in sessions), return_exceptions=True)

    def conversations(self) -> builtins.list[ConversationInfo]:
        """Every conversation under ``root_dir``, open or not, newest activity first."""
        found = []
        for notebook in self.root_dir.glob("*/audit.ipynb"):
            info = ConversationInfo.read(notebook)
            if info is not None:
                info.open = info.id in self
                found.append(info)
        return sorted(found, key=lambda c: c.updated_at, reverse=True)

    def _check_open(self) -> None:
        if self._closed:
            raise SessionClosedError("the session manager is closed")
        if not self._started:
            raise SessionClosedError("use `async with SessionManager(...)` (or await start()) first")

    # -- warm pool -----------------------------------------------------------------------

    async def _take_pooled(self, directory: Path) -> RunningKernel | None:
        """A live pool kernel whose directory is renamed to ``directory``, or None."""
        if directory.exists():
            return None  # a returning conversation keeps its directory: start a kernel in it
        while self._pool:
            kernel, pool_dir = self._pool.pop(0)
            if kernel.is_alive():
                os.rename(pool_dir, directory)  # the kernel's cwd follows the inode
                return kernel
            await kernel.shutdown(now=True)
            shutil.rmtree(pool_dir, ignore_errors=True)
        return None

    def _refill_pool(self) -> None:
        if self._closed or not self._started:
            return
        missing = self.pool_size - len(self._pool) - len(self._pool_tasks)
        for _ in range(max(0, missing)):
            task = asyncio.create_task(self._add_pool_kernel(), name="kernel-pool-fill")
            self._pool_tasks.add(task)
            task.add_done_callback(self._pool_tasks.discard)

    async def _add_pool_kernel(self) -> None:
        async with self._pool_semaphore:
            if self._closed:
                return
            pool_dir = self.root_dir / _POOL_DIR / uuid.uuid4().hex[:12]
            (pool_dir / "work").mkdir(parents=True)
            request = KernelRequest(workdir=pool_dir / "work", limits=self.limits,
                                    environment=self.environment, preload=POOL_PRELOAD)
            try:
                kernel = await self.backend.start(request)
            except Exception:
                log.exception("could not start a pool kernel")
                shutil.rmtree(pool_dir, ignore_errors=True)
                return
            if self._closed:
                await kernel.shutdown(now=True)
                shutil.rmtree(pool_dir, ignore_errors=True)
                return
            self._pool.append((kernel, pool_dir))

    async def wait_pool_ready(self, timeout: float = 60.0) -> int:
        """Wait until the pool is full (or ``timeout``); return how many kernels are ready."""
        deadline = time.monotonic() + timeout
        while len(self._pool) < self.pool_size and time.monotonic() < deadline:
            if not self._pool_tasks:
                self._refill_pool()
            await asyncio.sleep(0.02)
        return len(self._pool)

    # -- culling -------------------------------------------------------------------------

    async def _cull_loop(self) -> None:
        assert self.idle_timeout_s is not None
        interval = max(0.5, min(30.0, self.idle_timeout_s / 4))
        while True:
            await asyncio.sleep(interval)
            await self.cull_idle()

    async def cull_idle(self) -> builtins.list[str]:
        """Close sessions idle longer than ``idle_timeout_s``; return their ids."""
        if not self.idle_timeout_s:
            return []
        now = time.monotonic()
        idle = [sid for sid, s in self._sessions.items()
                if not s.busy and now - s.last_used > self.idle_timeout_s]
        for sid in idle:
            log.info("culling idle session %s", sid)
            await self.close(sid, reason="idle")
        return idle

    def describe(self) -> dict[str, Any]:
        """Counts for monitoring."""
        return {"sessions": len(self.list()), "pool_ready": len(self._pool),
                "pool_starting": len(self._pool_tasks)}


@dataclass
class ConversationInfo:
    """A conversation found on disk (its audit notebook's head)."""

    id: str
    """The conversation id."""
    directory: Path
    """Its directory under the manager's root."""
    created_at: str
    """When its session was first created (ISO-8601 UTC)."""
    updated_at: float
    """When its notebook last changed (seconds since the epoch)."""
    open: bool = False
    """True while a session of this manager has it open."""

    @classmethod
    def read(cls, notebook: Path) -> ConversationInfo | None:
        """The conversation whose notebook this is, or None for other files."""
        meta = read_notebook_head(notebook).get("kernel_analyst", {})
        sid = meta.get("session_id") if isinstance(meta, dict) else None
        if not isinstance(sid, str) or directory_name(sid) != notebook.parent.name:
            return None
        return cls(sid, notebook.parent, str(meta.get("created_at", "")), notebook.stat().st_mtime)


def read_notebook_head(notebook: Path) -> dict[str, Any]:
    """A notebook's metadata, read from the start of the file (an audit notebook puts it
    first), without parsing the cells; {} when it cannot be read."""
    try:
        with open(notebook, "rb") as f:
            head = f.read(1 << 20)
        start = head.index(b'"metadata":') + len(b'"metadata":')
        value, _ = json.JSONDecoder().raw_decode(head[start:].decode("utf-8", "replace"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _is_conversation(directory: Path, conversation_id: str) -> bool:
    """True when ``directory`` holds this conversation's notebook (so it is resumed)."""
    meta = read_notebook_head(directory / "audit.ipynb").get("kernel_analyst", {})
    return isinstance(meta, dict) and meta.get("session_id") == conversation_id


def _archive_notebook(directory: Path) -> None:
    """Keep the notebook of an earlier session of the same conversation."""
    current = directory / "audit.ipynb"
    if not current.exists():
        return
    try:
        repair_notebook(current)  # the host may have been killed mid-append
    except (OSError, ValueError):
        log.warning("could not repair %s; keeping it as it is", current)
    n = 1
    while (directory / f"audit.{n}.ipynb").exists():
        n += 1
    current.rename(directory / f"audit.{n}.ipynb")
