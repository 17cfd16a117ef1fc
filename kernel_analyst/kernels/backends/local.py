"""Kernels as child processes of this process (with the isolation of ``sandbox.py``)."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import resource
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import zmq.asyncio
from jupyter_client.connect import write_connection_file
from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

from .. import sandbox
from .._memory import MemoryProbe, memory_probe_for
from ..egress import EgressProxy, start_egress
from ..exceptions import ForkError, KernelConnectionError, KernelStartError
from ..limits import Limits
from ..request import Outcome, Request, RequestRouter
from ._forked import Place, fork_unavailable_reason, spawn_kernel
from ._process import ChildProcess, ForkedProcess
from ._template import TemplateKey, TemplateProcess, Templates
from ._wire import Link
from ._zmq import ZmqConnection, channel_url
from .base import DEFAULT_PRELOAD, Channel, KernelBackend, KernelEnvironment, KernelRequest, RunningKernel

log = logging.getLogger(__name__)

# Kernels still running when this process exits normally (a manager never closed) are
# killed here; if this process is killed instead, each kernel notices its parent is gone.
_LIVE: weakref.WeakSet[LocalKernel] = weakref.WeakSet()


@atexit.register
def _kill_leftover_kernels() -> None:
    for kernel in list(_LIVE):
        if kernel.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(kernel.proc.pid, signal.SIGKILL)

STARTUP_FILE = Path(__file__).resolve().parent.parent / "_kernel_startup.py"
_IOPUB_PROBE_S = 0.02
_CHANNELS = ("shell", "control", "stdin", "iopub")
_WELCOME_WAIT_S = 2.0  # a kernel of a known kind is ready at its IOPub welcome; else probe
_SHELL_PROBE_S = 0.5
_SHELL_PROBE_MAX_S = 4.0


def kernel_argv(env: KernelEnvironment) -> tuple[list[str], dict[str, Any]]:
    """The kernel command (with ``{connection_file}``) and kernelspec metadata for ``env``."""
    if env.kernelspec:
        try:
            spec = KernelSpecManager().get_kernel_spec(env.kernelspec)
        except NoSuchKernel as exc:
            raise KernelStartError(
                f"no kernelspec named {env.kernelspec!r}; see `jupyter kernelspec list`"
            ) from exc
        meta = {"name": env.kernelspec, "display_name": spec.display_name, "language": spec.language}
        return list(spec.argv), meta
    python = sandbox.current_python()
    if env.venv:
        python = str(Path(env.venv) / "bin" / "python")
    elif env.python:
        python = env.python
    if not (Path(python).is_file() and os.access(python, os.X_OK)):
        raise KernelStartError(f"no Python interpreter at {python!r}; check the venv/python path")
    meta = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    return [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"], meta


def _ipykernel_flags(argv: list[str]) -> list[str]:
    if not any("ipykernel" in part for part in argv):
        return []
    return [
        "--HistoryManager.hist_file=:memory:",
        f"--IPKernelApp.exec_files={STARTUP_FILE}",
        "--Application.log_level=WARN",
    ]


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
        return {"isolation": self.isolation, "backend": "local", "pid": self.proc.pid,
                "start": dict(self.start_path)}

    def moved(self, workdir: Path) -> None:
        if self.place is not None:
            self.place.rehome(workdir)

    def exit_status(self) -> int | None:
        code = self.proc.returncode
        if code is not None and code > 128 and self.plan.isolation == "sandbox":
            return 128 - code  # bubblewrap exits with 128 + n when its child died of signal n
        return code

    def memory_probe(self) -> MemoryProbe | None:
        if self._probe is None:
            self._probe = memory_probe_for(self.plan.cgroup, self.proc.pid)
        return self._probe


class LocalBackend(KernelBackend):
    """Starts kernels as child processes on this machine."""

    name = "local"

    def __init__(self, *, egress_hosts: Mapping[str, str] | None = None, template: bool = True) -> None:
        """
        Args:
            egress_hosts: fixed addresses for names of a network allowlist, used by its
                proxy instead of DNS (an internal mirror; tests on loopback).
            template: fork kernels from a pre-imported template process where possible
                (``docs/forking.md``); False starts every kernel as its own process.
        """
        self._context: zmq.asyncio.Context | None = None
        self.egress_hosts = dict(egress_hosts or {})
        self.template = template
        self.templates = Templates(DEFAULT_PRELOAD, STARTUP_FILE)
        """The template processes kernels are forked from."""

    def resolved_isolation(self, limits: Limits) -> str:
        return sandbox.resolve_isolation(limits)

    def fork_refusal(self, request: KernelRequest, isolation: str) -> str | None:
        """Why a kernel for ``request`` starts cold instead of forked (None: it forks)."""
        if not self.template:
            return "templates are off (LocalBackend(template=False))"
        reason = fork_unavailable_reason(isolation, request.environment.kernelspec)
        if reason is None:
            python = kernel_argv(request.environment)[0][0]
            reason = self.templates.unavailable(_template_key(python, isolation))
        return reason

    def prepare(self, request: KernelRequest) -> None:
        if self.fork_refusal(request, sandbox.resolve_isolation(request.limits)) is None:
            python = kernel_argv(request.environment)[0][0]
            self.templates.warm(_template_key(python, sandbox.resolve_isolation(request.limits)),
                                request.limits.startup_timeout_s)

    async def start(self, request: KernelRequest) -> RunningKernel:
        if self._context is None:
            self._context = zmq.asyncio.Context()
        isolation = sandbox.resolve_isolation(request.limits)
        argv, spec_meta = kernel_argv(request.environment)
        reason = self.fork_refusal(request, isolation)
        if reason is None:
            try:
                forked = await self._start_forked(request, isolation, argv[0])
            except ForkError as exc:
                reason = str(exc)
                log.warning("starting the kernel cold: %s", reason)
            else:
                forked.kernelspec = spec_meta
                return forked
        kernel = await self._start_cold(request, isolation, argv)
        kernel.start_path = {"path": "cold", "reason": reason}
        kernel.kernelspec = spec_meta
        return kernel

    async def _start_forked(self, request: KernelRequest, isolation: str, python: str) -> LocalKernel:
        """Fork the kernel from this interpreter's template (started, or started again
        after a death, on the way); one more try when the template dies mid-fork."""
        assert self._context is not None
        limits = request.limits
        if isolation != "none" and python == sandbox.current_python():
            await asyncio.to_thread(sandbox.matplotlib_cache, python)
        key = _template_key(python, isolation)
        for attempt in (1, 2):
            template = await self.templates.get(key, limits.startup_timeout_s)
            place = await Place.create(workdir=request.workdir, limits=limits, isolation=isolation,
                                       python=python, extra_env=_extra_env(request),
                                       egress_hosts=self.egress_hosts)
            try:
                kernel: LocalKernel = await spawn_kernel(
                    template, place, context=self._context, limits=limits,
                    launcher=str(template.info.get("launcher") or "ipykernel_launcher"))
            except ForkError as exc:
                if exc.permanent or attempt == 2:
                    raise
                log.info("the template ended while forking; starting it again")
                continue
            kernel.template = template
            versions = template.info.get("versions")
            kernel.versions = dict(versions) if isinstance(versions, dict) else None
            return kernel
        raise AssertionError("unreachable")

    async def _start_cold(self, request: KernelRequest, isolation: str, argv: list[str]) -> LocalKernel:
        # Unix socket paths are limited to ~107 bytes: keep the runtime dir short.
        runtime_dir = Path(tempfile.mkdtemp(prefix="ka-"))
        egress = await start_egress(request.limits, isolation, self.egress_hosts)
        try:
            return await self._launch(request, isolation, argv, runtime_dir, egress)
        except BaseException:
            shutil.rmtree(runtime_dir, ignore_errors=True)
            if egress is not None:
                await egress.aclose()
            raise

    async def _launch(self, request: KernelRequest, isolation: str, argv: list[str],
                      runtime_dir: Path, egress: EgressProxy | None = None) -> LocalKernel:
        conn_file, info = write_connection_file(
            str(runtime_dir / "kernel.json"), ip=str(runtime_dir / "k"), transport="ipc",
            key=uuid.uuid4().hex.encode(),
        )
        full = [a.replace("{connection_file}", conn_file) for a in argv] + _ipykernel_flags(argv)
        extra_env = _extra_env(request)
        if isolation != "none" and full[0] == sandbox.current_python():
            # Built once (about a second), off the event loop, and only for this library's
            # own interpreter: running an arbitrary environment's python here is not ours to do.
            await asyncio.to_thread(sandbox.matplotlib_cache, full[0])
        plan = sandbox.plan_launch(full, workdir=request.workdir, limits=request.limits,
                                   isolation=isolation, extra_env=extra_env,
                                   runtime_dir=runtime_dir, readable=[STARTUP_FILE],
                                   egress=egress.route if egress is not None else None)
        log_path = runtime_dir / "kernel.log"
        with open(log_path, "wb") as logf:
            proc = await _spawn(plan, logf)
        deadline = time.monotonic() + request.limits.startup_timeout_s
        try:
            await _sockets_bound(dict(info), proc, deadline)
        except BaseException as exc:
            await _kill(proc)
            plan.release()
            if isinstance(exc, _NotStarted):
                raise _start_failure(exc.exited, proc, plan, log_path, request.limits.startup_timeout_s) \
                    from None
            raise
        assert self._context is not None
        conn = ZmqConnection(dict(info), self._context,
                             max_message_bytes=max_message_bytes(request.limits))
        kernel = LocalKernel(proc, plan, conn, runtime_dir, log_path)
        kernel.egress = egress
        try:
            await _wait_ready(kernel, request.limits.startup_timeout_s)
        except BaseException:
            await kernel.shutdown(now=True)
            raise
        plan.on_ready()
        return kernel

    async def aclose(self) -> None:
        await self.templates.aclose()
        if self._context is not None:
            self._context.term()
            self._context = None


def _extra_env(request: KernelRequest) -> dict[str, str]:
    """What a kernel's environment adds to its isolation level's."""
    return {
        "KERNEL_ANALYST_MAX_OUTPUT": str(request.limits.max_output_bytes),
        "KERNEL_ANALYST_MAX_RICH": str(request.limits.max_rich_output_bytes),
        "KERNEL_ANALYST_PRELOAD": ",".join(request.preload),
        "MPLBACKEND": "module://matplotlib_inline.backend_inline",
        "PYTHONHASHSEED": "0",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        "JPY_PARENT_PID": str(os.getpid()),
    }


def _template_key(python: str, isolation: str) -> TemplateKey:
    # process and sandbox templates run outside any sandbox with the same clean environment
    return TemplateKey(python, "none" if isolation == "none" else "clean")


class _NotStarted(Exception):
    def __init__(self, exited: bool) -> None:
        self.exited = exited


async def _sockets_bound(info: dict[str, Any], proc: ChildProcess, deadline: float) -> None:
    """Wait until the kernel has bound its ipc sockets (their files exist), so our
    connects succeed at once: connecting earlier costs a retry cycle per socket, and
    50 kernels starting at once made ZMQ's I/O thread spin on failing retries."""
    paths = [channel_url(info, channel)[len("ipc://"):] for channel in _CHANNELS]
    directory = os.path.dirname(paths[0])
    names = {os.path.basename(p) for p in paths}
    interval = 0.002
    while not names <= set(os.listdir(directory)):
        if proc.returncode is not None:
            raise _NotStarted(exited=True)
        if time.monotonic() >= deadline:
            raise _NotStarted(exited=False)
        await asyncio.sleep(interval)
        interval = min(1.5 * interval, 0.01)


async def _kill(proc: ChildProcess) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(proc.wait(), 10)


def _start_failure(exited: bool, proc: ChildProcess | ForkedProcess, plan: sandbox.LaunchPlan, log_path: Path,
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


async def _spawn(plan: sandbox.LaunchPlan, logf: Any) -> ChildProcess:
    """Start the kernel process of ``plan`` (off the event loop; see ``_process``)."""
    spawning = asyncio.ensure_future(ChildProcess.spawn(
        plan.argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT, cwd=plan.cwd,
        env=plan.env, preexec_fn=plan.preexec, start_new_session=True))
    try:
        return await asyncio.shield(spawning)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):  # started after all: leave no process behind
            started = await spawning
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(started.pid, signal.SIGKILL)
            await started.wait()
        plan.release()
        raise
    except (OSError, subprocess.SubprocessError) as exc:  # preexec failures too
        plan.release()
        raise KernelStartError(f"could not run {plan.argv[0]!r}: {exc}") from exc


def max_message_bytes(limits: Limits) -> int:
    """The largest message this process accepts from a kernel: what the kernel's own
    caps let through, with room for JSON and base64 overhead (a safety net only)."""
    return 4 * (limits.max_output_bytes + limits.max_rich_output_bytes) + 16 * 1024 * 1024


async def _wait_ready(kernel: LocalKernel, timeout: float, *,
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
        raise _start_failure(not kernel.is_alive(), kernel.proc, kernel.plan, kernel.log_path, timeout)
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
