"""The session's kernel: started, used, replaced when it died or must go, let go at the end.

:class:`Setup` is what a session is and where its kernels run, shared by the session
and its collaborators. :class:`Lifecycle` owns the kernel in use: it starts one through
the backend (``launch``), puts another in its place (an undo's), replaces a dead or
unusable one within ``Limits.max_restarts`` per ``Limits.restart_window_s``, says why
the previous one ended when nobody saw it go, and sends the silent requests the session
reads its bookkeeping with.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..endings import EndCause, KernelEnding
from ..exceptions import KernelConnectionError, KernelCrashLoopError
from ..launch import (
    KernelBackend,
    KernelEnvironment,
    KernelRequest,
    MessageTap,
    Outcome,
    RunningKernel,
    deadline_after,
    diagnose,
)
from ..limits import Limits
from ._support import expression_json

log = logging.getLogger(__name__)


@dataclass
class Setup:
    """What one session is and where its kernels run (``session.limits = ...`` changes
    the limits for the session and every collaborator at once)."""

    id: str
    """The conversation id."""
    directory: Path
    """The session's directory (notebook, snapshots); the kernel works in ``work/``."""
    backend: KernelBackend
    """Where its kernels run."""
    limits: Limits
    """The limits in force."""
    environment: KernelEnvironment
    """Which Python its kernels run."""
    owner: str | None = None
    """Who its kernels run for (``KernelRequest.owner``: a gateway user)."""

    @property
    def workdir(self) -> Path:
        """The kernel's working directory."""
        return self.directory / "work"

    def request(self, attach: str | None = None) -> KernelRequest:
        """A kernel request for this session (``attach``: a kernel that may still run)."""
        return KernelRequest(workdir=self.workdir, limits=self.limits, environment=self.environment,
                             attach=attach, owner=self.owner)


def silent_content(expressions: dict[str, str], *, code: str = "") -> dict[str, Any]:
    """An execute request that records nothing: no cell, no history, no output."""
    return {"code": code, "silent": True, "store_history": False,
            "user_expressions": expressions, "allow_stdin": False, "stop_on_error": False}


class Lifecycle:
    """The kernel a session uses now (see the module).

    ``before_replace`` run before a kernel is shut down to be replaced (what belongs to
    that kernel ends with it: its checkpoints); ``on_new_kernel`` run whenever another
    kernel takes its place (what a kernel set up is set up again: display ids, the disk
    quota's file-size limit).
    """

    def __init__(self, setup: Setup) -> None:
        self.setup = setup
        self.kernel: RunningKernel | None = None
        """The kernel in use (None before start)."""
        self.loss_reported = True
        """False while the kernel in use could die unseen: its death is then reported by
        the next call (:meth:`ensure`)."""
        self.renumber = False
        """The kernel numbers its cells from 1: continue the notebook's numbering first."""
        self.before_replace: list[Callable[[], Awaitable[None]]] = []
        self.on_new_kernel: list[Callable[[], None]] = []
        self._restarts: list[float] = []
        self._watchers: list[MessageTap] = []

    async def start(self, attach: str | None = None) -> RunningKernel:
        """A new kernel from the backend (not yet in use: see :meth:`attach`)."""
        return await self.setup.backend.start(self.setup.request(attach))

    async def first(self, kernel: RunningKernel | None, attach: str | None = None) -> RunningKernel:
        """The conversation's first kernel, in use: ``kernel`` (a pre-started pool kernel)
        or a new one (reattached to ``attach`` where the backend can)."""
        adopted = kernel is not None
        kernel = kernel if kernel is not None else await self.start(attach)
        self.attach(kernel)
        if adopted:
            kernel.moved(self.setup.workdir)
            # A pool kernel started in another directory that was renamed to this one:
            # its cwd followed the rename; point HOME and cwd at the new name (it runs
            # before the first cell: the kernel handles shell requests in order).
            self.send_silently(f"_kernel_analyst.adopt({str(self.setup.workdir)!r})")
        return kernel

    def attach(self, kernel: RunningKernel, *, numbered: bool = False) -> None:
        """Use ``kernel`` from now on; ``numbered``: it already numbers its next cell after
        the notebook's last (else that is set before its first request)."""
        old = self.kernel
        if old is not None and old is not kernel:
            old.router.listeners[:] = [t for t in old.router.listeners if t not in self._watchers]
        kernel.router.listeners.extend(t for t in self._watchers if t not in kernel.router.listeners)
        self.kernel = kernel
        self.loss_reported = False
        self.renumber = not numbered

    def use(self, kernel: RunningKernel) -> None:
        """Put ``kernel`` (with this conversation's namespace, numbering its cells on from
        the notebook's already) in place of the current one, which the caller shuts down."""
        self.attach(kernel, numbered=True)
        self._new_kernel()

    async def swap(self, kernel: RunningKernel) -> None:
        """Put ``kernel`` (another namespace, numbering its cells on from the notebook's:
        a kept branch's) in place of the current one, which is shut down with what
        belonged to it (its checkpoints)."""
        for hook in self.before_replace:
            await hook()
        old = self.kernel
        self.use(kernel)
        if old is not None and old is not kernel:
            await old.shutdown(now=True)

    def watch(self, listener: MessageTap) -> Callable[[], None]:
        """Show ``listener`` the IOPub messages of the kernel in use and of every kernel
        attached later; return the function that stops it."""

        def iopub(channel: str, msg: dict[str, Any]) -> None:
            if channel == "iopub":
                listener(channel, msg)

        self._watchers.append(iopub)
        if self.kernel is not None:
            self.kernel.router.listeners.append(iopub)

        def stop() -> None:
            if iopub in self._watchers:
                self._watchers.remove(iopub)
            if self.kernel is not None and iopub in self.kernel.router.listeners:
                self.kernel.router.listeners.remove(iopub)

        return stop

    def alive(self) -> bool:
        """True when there is a kernel and its process runs."""
        return self.kernel is not None and self.kernel.is_alive()

    def usable(self) -> bool:
        """True when the kernel in use is alive and its connection works."""
        kernel = self.kernel
        return kernel is not None and kernel.is_alive() and kernel.router.failure is None

    async def ensure(self) -> KernelEnding | None:
        """A usable kernel: a dead or broken one is replaced. Returns why it ended when its
        loss was not reported yet (it died unseen, while idle), else None."""
        if self.usable():
            return None
        kernel = self.kernel
        unseen = not self.loss_reported
        ending = None
        if unseen:
            ending = (diagnose(kernel, failure=kernel.router.failure) if kernel is not None
                      else KernelEnding(EndCause.UNKNOWN, "the kernel was gone"))
        await self.replace("kernel died while idle" if unseen else "kernel restarted after death")
        return ending

    async def replace(self, reason: str) -> None:
        """Shut the current kernel down and start a fresh one (bounded restarts); the
        caller reports the loss."""
        limits = self.setup.limits
        now = time.monotonic()
        self._restarts = [t for t in self._restarts if now - t < limits.restart_window_s]
        if len(self._restarts) >= limits.max_restarts:
            raise KernelCrashLoopError(
                f"session {self.setup.id!r}: kernel restarted {len(self._restarts)} times in "
                f"{limits.restart_window_s:g} s ({reason}); giving up. Check the kernel "
                "log, the memory limit, and the code being run, then open a new session."
            )
        self._restarts.append(now)
        for hook in self.before_replace:
            await hook()
        old = self.kernel
        if old is not None:
            await old.shutdown(now=True)
        self._new_kernel()
        log.info("session %s: starting a fresh kernel (%s)", self.setup.id, reason)
        self.attach(await self.start())
        self.loss_reported = True  # every caller reports this loss itself

    def _new_kernel(self) -> None:
        for hook in self.on_new_kernel:
            hook()

    async def end(self, *, keep: bool, now: bool = False) -> None:
        """Let the kernel go: shut it down, or (``keep``) leave it running for another process."""
        if self.kernel is not None:
            await (self.kernel.detach() if keep else self.kernel.shutdown(now=now))

    # -- silent requests ----------------------------------------------------------------

    async def silent(self, expressions: dict[str, str], *, timeout: float,
                     code: str = "") -> dict[str, Any] | None:
        """Evaluate user_expressions (after ``code``) in a silent execute: no cell, no history."""
        kernel = self.kernel
        if kernel is None or not kernel.is_alive():
            return None
        try:
            outcome, request = await kernel.router.request(
                "shell", "execute_request", silent_content(expressions, code=code),
                deadline=deadline_after(timeout))
        except KernelConnectionError:
            return None
        if outcome is not Outcome.REPLY:
            return None
        result: dict[str, Any] = request.content.get("user_expressions", {})
        return result

    async def evaluate(self, expression: str, timeout: float) -> Any:
        """The JSON value of a ``_kernel_analyst`` expression (None if it failed)."""
        result = await self.silent({"v": expression}, timeout=timeout)
        return expression_json(result.get("v")) if result else None

    def send_silently(self, code: str) -> None:
        """Send code to run before the next request, without waiting for it (the kernel
        handles shell requests in order; its reply is routed like any other)."""
        assert self.kernel is not None
        router = self.kernel.router
        router.forget(router.send("shell", "execute_request", silent_content({}, code=code)))

    def describe(self) -> dict[str, Any] | None:
        """Where and how the kernel runs (None before start)."""
        return self.kernel.describe() if self.kernel is not None else None
