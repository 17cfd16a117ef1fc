"""LocalBackend: kernels as child processes of this machine, forked from a template or started cold.

Where it can, a kernel is forked from a template process that has imported IPython,
ipykernel and the preload list once (``_template.py``, ``_forked.py``, ``_place.py``);
else it is started cold, as its own process, under the isolation of ``sandbox.py``.
Either way the process becomes a :class:`~._local_kernel.LocalKernel`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import zmq.asyncio
from jupyter_client.connect import write_connection_file
from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

from ..exceptions import ForkError, KernelStartError
from ..limits import Limits
from . import sandbox
from ._forked import spawn_kernel
from ._inkernel import STARTUP_FILES
from ._local_kernel import LocalKernel, max_message_bytes, start_failure, wait_ready
from ._place import Place, fork_unavailable_reason
from ._process import ChildProcess
from ._seccomp import bwrap_with_filter
from ._template import TemplateKey, Templates
from ._threads import thread_count, thread_environment
from ._zmq import ZmqConnection, channel_url
from .base import DEFAULT_PRELOAD, KernelBackend, KernelEnvironment, KernelRequest, RunningKernel
from .egress import EgressProxy, start_egress

log = logging.getLogger(__name__)

_CHANNELS = ("shell", "control", "stdin", "iopub")


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
        *(f"--IPKernelApp.exec_files={path}" for path in STARTUP_FILES),
        "--Application.log_level=WARN",
    ]


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
        self.templates = Templates(DEFAULT_PRELOAD, STARTUP_FILES)
        """The template processes kernels are forked from."""

    def resolved_isolation(self, limits: Limits) -> str:
        return sandbox.resolve_isolation(limits)

    def kernels_differ_by_owner(self, limits: Limits) -> bool:
        return limits.tenant_cpus is not None  # each in its owner's CPU cgroup

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
            place = await self.new_place(request, isolation=isolation, python=python)
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

    async def new_place(self, request: KernelRequest, *, isolation: str, python: str) -> Place:
        """A place for a line of forked kernels of ``request`` (a new conversation's: its
        directory, cgroup and, under ``sandbox``, its own sandbox)."""
        return await Place.create(workdir=request.workdir, limits=request.limits, isolation=isolation,
                                  python=python, extra_env=_extra_env(request),
                                  egress_hosts=self.egress_hosts, owner=request.owner)

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
                                   runtime_dir=runtime_dir, readable=STARTUP_FILES,
                                   egress=egress.route if egress is not None else None, owner=request.owner)
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
                raise start_failure(exc.exited, proc, plan, log_path, request.limits.startup_timeout_s) \
                    from None
            raise
        assert self._context is not None
        conn = ZmqConnection(dict(info), self._context,
                             max_message_bytes=max_message_bytes(request.limits))
        kernel = LocalKernel(proc, plan, conn, runtime_dir, log_path)
        kernel.egress = egress
        try:
            await wait_ready(kernel, request.limits.startup_timeout_s)
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
        **thread_environment(thread_count(request.limits, budgeted=request.owner is not None)),
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


async def _spawn(plan: sandbox.LaunchPlan, logf: Any) -> ChildProcess:
    """Start the kernel process of ``plan`` (off the event loop; see ``_process``)."""
    with bwrap_with_filter(plan.argv, plan.seccomp) as (argv, fds):  # open until the spawn is over
        return await _spawn_argv(plan, argv, fds, logf)


async def _spawn_argv(plan: sandbox.LaunchPlan, argv: list[str], fds: tuple[int, ...],
                      logf: Any) -> ChildProcess:
    spawning = asyncio.ensure_future(ChildProcess.spawn(
        argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT, cwd=plan.cwd,
        env=plan.env, preexec_fn=plan.preexec, start_new_session=True, pass_fds=fds))
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


