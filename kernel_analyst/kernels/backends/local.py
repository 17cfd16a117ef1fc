"""Kernels as child processes of this process (with the isolation of ``sandbox.py``)."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
import weakref
from pathlib import Path
from typing import Any

import zmq.asyncio
from jupyter_client.connect import write_connection_file
from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

from .. import sandbox
from ..exceptions import KernelStartError
from ..limits import Limits
from ._zmq import ZmqConnection
from .base import Channel, KernelBackend, KernelEnvironment, KernelRequest, MessageHandler, RunningKernel

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
_SHELL_PROBE_S = 0.5


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

    def __init__(self, proc: asyncio.subprocess.Process, plan: sandbox.LaunchPlan,
                 conn: ZmqConnection, runtime_dir: Path, log_path: Path) -> None:
        self.proc = proc
        self.plan = plan
        self.conn = conn
        self.runtime_dir = runtime_dir
        self.log_path = log_path
        self.isolation = plan.isolation
        self.kernel_info = {}
        self.kernelspec = {}
        self._exited = asyncio.ensure_future(proc.wait())
        _LIVE.add(self)
        self._closed = False

    def set_handler(self, handler: MessageHandler) -> None:
        self.conn.set_handler(handler)

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
            self.send("control", "interrupt_request", {})
        else:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGINT)

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
                self.send("control", "shutdown_request", {"restart": False})
                await self._wait(2.0)
            if self.is_alive():
                self._signal_group(signal.SIGTERM)
                await self._wait(1.0 if not now else 0.2)
            # Also reaps children left in the kernel's process group after it exited.
            self._signal_group(signal.SIGKILL)
            await self._wait(5.0)
        finally:
            await self.conn.close()
            # Background and setsid children left the process group: reap them by cgroup.
            await asyncio.to_thread(self.plan.release)
            shutil.rmtree(self.runtime_dir, ignore_errors=True)

    def log_tail(self, limit: int = 2000) -> str:
        """The end of the kernel's stdout/stderr log (for error messages)."""
        try:
            return self.log_path.read_text(errors="replace")[-limit:]
        except OSError:
            return ""

    def describe(self) -> dict[str, Any]:
        return {"isolation": self.isolation, "backend": "local", "pid": self.proc.pid}


class LocalBackend(KernelBackend):
    """Starts kernels as child processes on this machine."""

    name = "local"

    def __init__(self) -> None:
        self._context: zmq.asyncio.Context | None = None

    def resolved_isolation(self, limits: Limits) -> str:
        return sandbox.resolve_isolation(limits)

    async def start(self, request: KernelRequest) -> RunningKernel:
        if self._context is None:
            self._context = zmq.asyncio.Context()
        isolation = sandbox.resolve_isolation(request.limits)
        argv, spec_meta = kernel_argv(request.environment)
        # Unix socket paths are limited to ~107 bytes: keep the runtime dir short.
        runtime_dir = Path(tempfile.mkdtemp(prefix="ka-"))
        try:
            kernel = await self._launch(request, isolation, argv, runtime_dir)
        except BaseException:
            shutil.rmtree(runtime_dir, ignore_errors=True)
            raise
        kernel.kernelspec = spec_meta
        return kernel

    async def _launch(self, request: KernelRequest, isolation: str, argv: list[str],
                      runtime_dir: Path) -> LocalKernel:
        conn_file, info = write_connection_file(
            str(runtime_dir / "kernel.json"), ip=str(runtime_dir / "k"), transport="ipc",
            key=uuid.uuid4().hex.encode(),
        )
        full = [a.replace("{connection_file}", conn_file) for a in argv] + _ipykernel_flags(argv)
        extra_env = {
            "KERNEL_ANALYST_MAX_OUTPUT": str(request.limits.max_output_bytes),
            "KERNEL_ANALYST_PRELOAD": ",".join(request.preload),
            "MPLBACKEND": "module://matplotlib_inline.backend_inline",
            "PYTHONHASHSEED": "0",
            "PYDEVD_DISABLE_FILE_VALIDATION": "1",
            "JPY_PARENT_PID": str(os.getpid()),
        }
        if isolation != "none" and full[0] == sandbox.current_python():
            # Built once (about a second), off the event loop, and only for this library's
            # own interpreter: running an arbitrary environment's python here is not ours to do.
            await asyncio.to_thread(sandbox.matplotlib_cache, full[0])
        plan = sandbox.plan_launch(full, workdir=request.workdir, limits=request.limits,
                                   isolation=isolation, extra_env=extra_env,
                                   runtime_dir=runtime_dir, readable=[STARTUP_FILE])
        log_path = runtime_dir / "kernel.log"
        with open(log_path, "wb") as logf:
            try:
                proc = await asyncio.create_subprocess_exec(
                    *plan.argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                    cwd=plan.cwd, env=plan.env, preexec_fn=plan.preexec, start_new_session=True,
                )
            except (OSError, subprocess.SubprocessError) as exc:  # preexec failures too
                plan.release()
                raise KernelStartError(f"could not run {plan.argv[0]!r}: {exc}") from exc
        assert self._context is not None
        kernel = LocalKernel(proc, plan, ZmqConnection(dict(info), self._context), runtime_dir, log_path)
        try:
            await _wait_ready(kernel, request.limits.startup_timeout_s)
        except BaseException:
            await kernel.shutdown(now=True)
            raise
        plan.on_ready()
        return kernel

    async def aclose(self) -> None:
        if self._context is not None:
            self._context.term()
            self._context = None


async def _wait_ready(kernel: LocalKernel, timeout: float) -> None:
    """Ready = a kernel_info reply on shell and a message on IOPub (the SUB is connected).

    Tighter than jupyter_client's loop, which loses 0.2 s per missed IOPub probe.
    """
    deadline = time.monotonic() + timeout
    replies: dict[str, asyncio.Future[dict[str, Any]]] = {}
    iopub_seen = asyncio.Event()
    loop = asyncio.get_running_loop()

    def handler(channel: str, msg: dict[str, Any]) -> None:
        parent = msg.get("parent_header", {}).get("msg_id")
        if channel == "iopub":
            iopub_seen.set()
        elif channel == "shell" and parent in replies and not replies[parent].done():
            replies[parent].set_result(msg)

    kernel.conn.start(handler)
    while True:
        remaining = deadline - time.monotonic()
        if not kernel.is_alive():
            raise KernelStartError(
                f"kernel exited during startup (code {kernel.proc.returncode}):\n{kernel.log_tail()}"
            )
        if remaining <= 0:
            raise KernelStartError(
                f"kernel did not become ready within {timeout:g} s; raise "
                f"Limits.startup_timeout_s if the machine is slow.\n{kernel.log_tail()}"
            )
        msg_id = kernel.send("shell", "kernel_info_request", {})
        replies[msg_id] = loop.create_future()
        waiters: list[asyncio.Future[Any]] = [replies[msg_id], kernel._exited]
        done, _ = await asyncio.wait(waiters, timeout=min(_SHELL_PROBE_S, remaining),
                                     return_when=asyncio.FIRST_COMPLETED)
        if replies[msg_id] not in done:
            continue
        kernel.kernel_info = replies[msg_id].result()["content"]
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(iopub_seen.wait(), _IOPUB_PROBE_S)
        if iopub_seen.is_set():
            return
