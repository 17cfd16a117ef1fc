"""A kernel process on this machine (:class:`LocalKernel`), and the loop that knows it is ready.

Made by ``local.py`` (a cold start: the kernel command, under the isolation of
``sandbox.py``) and by ``_forked.py`` (a fork of a template or a checkpoint); both hand
the started process here and wait in :func:`wait_ready` until it answers.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import resource
import shutil
import signal
import time
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..exceptions import KernelConnectionError, KernelStartError
from ..limits import Limits
from . import sandbox
from ._memory import MemoryProbe, memory_probe_for
from ._process import EXIT_UNKNOWN, ChildProcess, ForkedProcess
from ._wire import Link
from ._zmq import ZmqConnection
from .base import RunningKernel
from .egress import EgressProxy
from .request import Channel, Outcome, Request, RequestRouter

if TYPE_CHECKING:
    from ._place import Place
    from ._template import TemplateProcess

_IOPUB_PROBE_S = 0.02
_WELCOME_WAIT_S = 2.0  # a kernel of a known kind is ready at its IOPub welcome; else probe
_SHELL_PROBE_S = 0.5
_SHELL_PROBE_MAX_S = 4.0

# Kernels still running when this process exits normally (a manager never closed) are
# killed here; if this process is killed instead, each kernel notices its parent is gone.
_LIVE: weakref.WeakSet[LocalKernel] = weakref.WeakSet()


@atexit.register
def _kill_leftover_kernels() -> None:
    for kernel in list(_LIVE):
        if kernel.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(kernel.proc.pid, signal.SIGKILL)


class LocalKernel(RunningKernel):
    """A kernel process started by :class:`LocalBackend`."""

    def __init__(self, proc: ChildProcess | ForkedProcess, plan: sandbox.LaunchPlan,
                 conn: ZmqConnection, runtime_dir: Path, log_path: Path, *,
                 place: Place | None = None, lifeline: Link | None = None) -> None:
        self.proc = proc
        self.place = place
        """Where a forked kernel lives, shared with its checkpoints (None: started cold)."""
        self.lifeline = lifeline
        """A forked kernel's lifeline (it ends when this closes)."""
        self.start_path: dict[str, Any] = {"path": "template" if place is not None else "cold"}
        """How the kernel started: ``template`` (forked) or ``cold`` with the reason."""
        self.template: TemplateProcess | None = None
        """The template this kernel was forked from, if it was."""
        self.plan = plan
        self.conn = conn
        self.runtime_dir = runtime_dir
        self.log_path = log_path
        self.isolation = plan.isolation
        self.kernel_info = {}
        self.kernelspec = {}
        self.router = RequestRouter(self)
        self._exited = asyncio.ensure_future(proc.wait())
        self.welcomed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        """Done once IOPub said welcome (ipykernel 7 does on each new subscription):
        this process's subscription is in place."""
        self.egress: EgressProxy | None = place.egress if place is not None else None
        """The network allowlist's proxy serving this kernel, if it has one."""
        _LIVE.add(self)
        self._closed = False
        self._probe: MemoryProbe | None = None
        conn.start(self._deliver, on_failure=self.router.fail, on_send_failed=self.router.fail_request)

    def _deliver(self, channel: str, msg: dict[str, Any]) -> None:
        if channel == "iopub" and msg.get("msg_type") == "iopub_welcome" and not self.welcomed.done():
            self.welcomed.set_result(None)
        self.router.deliver(channel, msg)

    def send(self, channel: Channel, msg_type: str, content: dict[str, Any]) -> str:
        return self.conn.send(channel, msg_type, content)

    def send_message(self, channel: Channel, msg: dict[str, Any]) -> str:
        return self.conn.send_message(channel, msg)

    async def wait_exited(self) -> None:
        await asyncio.shield(self._exited)

    def is_alive(self) -> bool:
        return self.proc.returncode is None

    async def interrupt(self) -> None:
        if not self.is_alive():
            return
        if self.plan.interrupt_mode == "message":
            with contextlib.suppress(KernelConnectionError):  # a broken connection fails the cell anyway
                self.router.forget(self.router.send("control", "interrupt_request", {}))
        else:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGINT)

    def limit_file_size(self, max_bytes: int) -> None:
        # The soft limit only: raising a hard limit again (once there is room) needs
        # CAP_SYS_RESOURCE, which even root lacks in a container.
        pids = self.plan.cgroup.pids() if self.plan.cgroup is not None else {self.proc.pid}
        for pid in pids:
            with contextlib.suppress(OSError, ValueError):  # gone, or not ours to limit
                _, hard = resource.prlimit(pid, resource.RLIMIT_FSIZE)
                soft = max_bytes if hard == resource.RLIM_INFINITY else min(max_bytes, hard)
                resource.prlimit(pid, resource.RLIMIT_FSIZE, (soft, hard))

    def _signal_group(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    async def _wait(self, seconds: float) -> bool:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._exited), seconds)
        return not self.is_alive()

    async def shutdown(self, *, now: bool = False) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self.is_alive() and not now:
                with contextlib.suppress(KernelConnectionError):
                    self.router.forget(self.router.send("control", "shutdown_request", {"restart": False}))
                await self._wait(2.0)
            if self.is_alive():
                self._signal_group(signal.SIGTERM)
                await self._wait(1.0 if not now else 0.2)
            # Also reaps children left in the kernel's process group after it exited.
            self._signal_group(signal.SIGKILL)
            await self._wait(5.0)
        finally:
            await self.conn.close()
            await self._release()

    async def _release(self) -> None:
        if self.place is not None:  # shared with checkpoints: the last one lets go
            if self.lifeline is not None:
                self.lifeline.close()
            await self.place.release()
            return
        # Background and setsid children left the process group: reap them by cgroup.
        await asyncio.to_thread(self.plan.release)
        if self.egress is not None:
            await self.egress.aclose()
        shutil.rmtree(self.runtime_dir, ignore_errors=True)

    def log_tail(self, limit: int = 2000) -> str:
        """The end of the kernel's stdout/stderr log (for error messages)."""
        try:
            return self.log_path.read_text(errors="replace")[-limit:]
        except OSError:
            return ""

    def describe(self) -> dict[str, Any]:
        # "enforced": the mechanism behind each limit (the launch's log line), e.g.
        # {"cpu": "1 core (quota + weight), cgroup v1", "syscalls": "seccomp: ..."}.
        return {"isolation": self.isolation, "backend": "local", "pid": self.proc.pid,
                "start": dict(self.start_path), "enforced": dict(self.plan.enforced)}

    def moved(self, workdir: Path) -> None:
        if self.place is not None:
            self.place.rehome(workdir)

    def exit_status(self) -> int | None:
        return exit_status(self.proc.returncode, self.plan.isolation)

    def memory_probe(self) -> MemoryProbe | None:
        if self._probe is None:
            self._probe = memory_probe_for(self.plan.cgroup, self.proc.pid)
        return self._probe


def exit_status(code: int | None, isolation: str) -> int | None:
    """:meth:`RunningKernel.exit_status` from a process's return code: minus the signal for
    a sandboxed kernel that bubblewrap reports as 128 + n, None when nobody reported how it
    ended (a forked kernel whose template was killed: its status was read as "signal 128")."""
    if code is None or code == EXIT_UNKNOWN:
        return None
    if code > 128 and isolation == "sandbox":
        return 128 - code  # bubblewrap exits with 128 + n when its child died of signal n
    return code


def max_message_bytes(limits: Limits) -> int:
    """The largest message this process accepts from a kernel: what the kernel's own
    caps let through, with room for JSON and base64 overhead (a safety net only)."""
    return 4 * (limits.max_output_bytes + limits.max_rich_output_bytes) + 16 * 1024 * 1024


def start_failure(exited: bool, proc: ChildProcess | ForkedProcess, plan: sandbox.LaunchPlan, log_path: Path,
                   timeout: float) -> KernelStartError:
    """The error for a kernel that exited, or did not answer, during startup."""
    try:
        log_tail = log_path.read_text(errors="replace")[-2000:]
    except OSError:
        log_tail = ""
    if exited:
        hint = sandbox.start_failure_hint(plan, log_tail)
        return KernelStartError(f"kernel exited during startup (code {proc.returncode}). {hint}\n{log_tail}")
    return KernelStartError(f"kernel did not become ready within {timeout:g} s; raise "
                            f"Limits.startup_timeout_s if the machine is slow.\n{log_tail}")


async def wait_ready(kernel: LocalKernel, timeout: float, *,
                      known_info: dict[str, Any] | None = None) -> None:
    """Ready = a reply to a ``kernel_info`` probe on shell, and a status message of one
    on IOPub (the SUB socket is connected and subscribed).

    ``known_info``: the kernel_info reply of kernels just like this one (forked from one
    template). Then the kernel's IOPub welcome alone says it is ready (one message from
    its IOPub thread instead of a round trip through its main thread); without a welcome
    in a moment, the probes below decide.

    Probes go out at growing intervals until one is answered (a kernel still starting
    queues them all); the reply to any probe counts, and the replies to the
    others are awaited before the kernel is handed over, so no request of the ready
    loop is still unanswered when the first cell is sent. Tighter than jupyter_client's
    loop, which loses 0.2 s per missed IOPub probe.
    """
    deadline = time.monotonic() + timeout
    router = kernel.router
    if known_info is not None:
        await router.wait_any([kernel.welcomed], min(deadline, time.monotonic() + _WELCOME_WAIT_S))
        if kernel.welcomed.done():
            kernel.kernel_info = dict(known_info)
            return
    probes: list[Request] = []
    iopub_wait, shell_wait = _IOPUB_PROBE_S, _SHELL_PROBE_S
    try:
        while True:
            _check_starting(kernel, deadline, timeout)
            probes.append(router.send("shell", "kernel_info_request", {}))
            answered = await _first_reply(router, probes, min(deadline, time.monotonic() + shell_wait))
            if answered is None:
                # A probe waits in the kernel's socket until it can answer, so more are
                # only insurance; on a busy machine each one costs the kernel a reply.
                shell_wait = min(2 * shell_wait, _SHELL_PROBE_MAX_S)
                continue
            kernel.kernel_info = answered.content
            if not _iopub_ready(kernel, probes):
                await router.wait_any([kernel.welcomed, *(p.busy for p in probes)],
                                      time.monotonic() + iopub_wait)
                # The subscription is slow to arrive (a busy machine): probe less often.
                iopub_wait = min(2 * iopub_wait, _SHELL_PROBE_S)
            if _iopub_ready(kernel, probes):
                await _drain_probes(router, probes, deadline)
                return
    finally:
        for probe in probes:
            router.forget(probe)


def _iopub_ready(kernel: LocalKernel, probes: list[Request]) -> bool:
    """This process receives IOPub: a probe's status arrived, or the kernel's welcome."""
    return kernel.welcomed.done() or any(p.busy.done() for p in probes)


def _check_starting(kernel: LocalKernel, deadline: float, timeout: float) -> None:
    if not kernel.is_alive() or time.monotonic() >= deadline:
        raise start_failure(not kernel.is_alive(), kernel.proc, kernel.plan, kernel.log_path, timeout)
    if kernel.router.failure is not None:
        raise KernelStartError(f"lost the connection to a starting kernel: {kernel.router.failure}")


async def _first_reply(router: RequestRouter, probes: list[Request], until: float) -> Request | None:
    """The first probe answered before ``until`` (or the kernel's exit), if any."""
    waiting = [p.reply for p in probes if not p.reply.done()]
    if waiting and not any(p.reply.done() for p in probes):
        await router.wait_any(waiting, until)
    return next((p for p in probes if p.reply.done() and p.reply.exception() is None), None)


async def _drain_probes(router: RequestRouter, probes: list[Request], deadline: float) -> None:
    """Wait for the replies to every probe sent (shell replies come in order, so they
    follow the first one at once)."""
    for probe in probes:
        if await router.wait(probe, deadline) is not Outcome.REPLY:
            return  # the next request will notice the death or the failure itself
