"""Where a line of forked kernels lives: :class:`Place`.

A :class:`Place` is what a line of kernels shares: one conversation's kernel, the
checkpoints taken from it and the kernels brought back from them. It holds the runtime
directory (sockets, logs), the launch plan (environment, cgroup, resource limits) and,
under ``sandbox``, a bubblewrap sandbox made exactly as for a cold kernel but running a
placeholder (``sh``, then ``cat``) instead of the kernel: forked kernels join its
namespaces (``_inkernel/_forkkernel/confine.py``: ``enter``), so each conversation keeps a
sandbox of its own.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ctypes
import functools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from ..exceptions import KernelStartError
from ..limits import Limits
from . import sandbox
from ._cgroups import KernelCgroup
from ._inkernel import KERNEL_READS
from ._process import ChildProcess
from ._seccomp import bwrap_with_filter
from .egress import EgressProxy, start_egress

HOLDER = ["sh", "-c", 'echo "$$"; exec cat']
"""What a sandbox of forked kernels runs: it prints its pid (as the sandbox numbers it)
once the sandbox is set up, then waits for its stdin to close."""
_LANDLOCK_SCOPES_ABI = 6


@functools.lru_cache(maxsize=1)
def landlock_abi() -> int:
    """The Landlock ABI version of this machine's kernel (0 without Landlock)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        version = int(libc.syscall(444, None, ctypes.c_size_t(0), 1))
    except (OSError, AttributeError):
        return 0
    return max(0, version)


class Place:
    """Where a line of forked kernels lives (see the module docstring)."""

    def __init__(self, plan: sandbox.LaunchPlan, runtime_dir: Path, isolation: str, *,
                 landlock: bool, egress: EgressProxy | None = None) -> None:
        self.plan = plan
        self.runtime_dir = runtime_dir
        self.isolation = isolation
        self.landlock = landlock
        """Each kernel confines itself with Landlock (signals, abstract sockets, tracing)."""
        self.egress = egress
        self.holder: ChildProcess | None = None
        """The sandbox's bubblewrap process (``sandbox`` only)."""
        self.holder_pid: int | None = None
        """The host pid of the process inside the sandbox whose namespaces kernels join."""
        self._holder_stdin: int | None = None
        self._refs = 0
        self._generation = 0
        self._released = False

    @classmethod
    async def create(cls, *, workdir: Path, limits: Limits, isolation: str, python: str,
                     extra_env: dict[str, str], egress_hosts: dict[str, str],
                     owner: str | None = None) -> Place:
        """Make the place (and, under ``sandbox``, start its sandbox); ``owner``: who its
        kernels run for (``Limits.tenant_cpus``)."""
        # Unix socket paths are limited to ~107 bytes: keep the runtime dir short.
        runtime_dir = Path(tempfile.mkdtemp(prefix="ka-"))
        egress: EgressProxy | None = None
        plan: sandbox.LaunchPlan | None = None
        try:
            egress = await start_egress(limits, isolation, egress_hosts)
            argv = HOLDER if isolation == "sandbox" else [python]
            plan = sandbox.plan_launch(
                argv, workdir=workdir, limits=limits, isolation=isolation, extra_env=extra_env,
                runtime_dir=runtime_dir, readable=[str(path) for path in KERNEL_READS],
                egress=egress.route if egress is not None else None, interpreter=python, owner=owner)
            place = cls(plan, runtime_dir, isolation, egress=egress,
                        landlock=isolation == "process" and landlock_abi() >= _LANDLOCK_SCOPES_ABI)
            if isolation == "sandbox":
                await place._start_holder(limits.startup_timeout_s)
        except BaseException:
            if plan is not None:
                await asyncio.to_thread(plan.release)
            if egress is not None:
                await egress.aclose()
            shutil.rmtree(runtime_dir, ignore_errors=True)
            raise
        return place

    async def _start_holder(self, timeout: float) -> None:
        """Start the sandbox (the launch of a cold sandboxed kernel, with the placeholder
        as its command) and find the process inside it."""
        plan = self.plan
        info_r, info_w = os.pipe()
        out_r, out_w = os.pipe()
        in_r, in_w = os.pipe()
        log_path = self.runtime_dir / "sandbox.log"
        try:
            with open(log_path, "wb") as logf, bwrap_with_filter(plan.argv, plan.seccomp) as (argv, fds):
                self.holder = await ChildProcess.spawn(
                    [argv[0], "--info-fd", str(info_w), *argv[1:]], stdin=in_r, stdout=out_w, stderr=logf,
                    cwd=plan.cwd, env=plan.env, preexec_fn=plan.preexec, start_new_session=True,
                    pass_fds=(info_w, *fds))
        except (OSError, subprocess.SubprocessError) as exc:
            for fd in (info_r, out_r, in_w):
                os.close(fd)
            raise KernelStartError(f"could not start the sandbox: {exc}") from exc
        finally:
            for fd in (info_w, out_w, in_r):
                os.close(fd)
        self._holder_stdin = in_w
        try:
            deadline = time.monotonic() + timeout
            info = await _read_until(info_r, b"}", deadline, self.holder)
            own_pid = await _read_until(out_r, b"\n", deadline, self.holder)
        except KernelStartError as exc:
            raise KernelStartError(f"{exc}\n{read_tail(log_path)}") from None
        finally:
            os.close(info_r)
            os.close(out_r)
        init = int(json.loads(info.decode())["child-pid"])
        self.holder_pid = _inner_process(init, int(own_pid.strip() or 0))

    def acquire(self) -> Place:
        """One more kernel or checkpoint lives here."""
        self._refs += 1
        return self

    async def release(self) -> None:
        """One less; the last one ends the sandbox, the cgroup and the directory."""
        self._refs -= 1
        if self._refs > 0 or self._released:
            return
        self._released = True
        if self._holder_stdin is not None:
            os.close(self._holder_stdin)
            self._holder_stdin = None
        if self.holder is not None and self.holder.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.holder.pid, signal.SIGKILL)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.holder.wait(), 10)
        await asyncio.to_thread(self.plan.release)
        if self.egress is not None:
            await self.egress.aclose()
        shutil.rmtree(self.runtime_dir, ignore_errors=True)

    def rehome(self, workdir: Path) -> None:
        """The conversation's directory was renamed (a pool kernel was adopted): later
        kernels of this place start there."""
        old = self.plan.cwd
        self.plan.cwd = str(workdir)
        if self.plan.env.get("HOME") == old:
            self.plan.env["HOME"] = str(workdir)

    def kernel_dir(self) -> Path:
        """A new directory for one kernel's sockets and log (each kernel of the place
        gets its own; under ``sandbox`` it is inside the bound runtime directory)."""
        self._generation += 1
        directory = self.runtime_dir / f"k{self._generation}"
        directory.mkdir()
        return directory

    def spec(self, *, inside: bool = False) -> dict[str, Any]:
        """The process part of a kernel's spec (see ``_forkkernel._setup_process``).
        ``inside``: the process that forks it already lives here (a checkpoint of this
        place), so its cgroup, namespaces and Landlock domain are already the kernel's."""
        plan = self.plan
        sandboxed = self.isolation == "sandbox"
        return {
            "cwd": sandbox.SANDBOX_WORKDIR if sandboxed else plan.cwd,
            "env": dict(plan.env),
            "rlimits": [list(pair) for pair in plan.rlimits],
            "unshare_net": plan.unshare_net and not sandboxed and not inside,
            "enter": self.holder_pid if sandboxed and not inside else None,
            "landlock": self.landlock and not inside,
            # A checkpoint's kernels inherit its filter; a second copy would only cost time.
            "seccomp": base64.b64encode(plan.seccomp).decode() if plan.seccomp and not inside else None,
        }

    def moved_by_host(self, *, inside: bool) -> KernelCgroup | None:
        """The cgroup this process moves a new kernel into while the kernel binds its
        sockets (None: a checkpoint's kernels are born in it). A move waits for an RCU
        grace period (5-20 ms here), so it is kept off the kernel's own path; the pages
        the kernel copies before it (a few MB) count in this process's cgroup, which
        holds every kernel's cgroup anyway. Under ``sandbox`` the process moved is the
        kernel inside the sandbox (its pid comes with its first message); the process
        outside that waits for it stays here."""
        if self.plan.cgroup is None or inside:
            return None
        return self.plan.cgroup


async def _read_until(fd: int, end: bytes, deadline: float, proc: ChildProcess) -> bytes:
    """Read ``fd`` until ``end`` appears (a line from the starting sandbox)."""
    loop = asyncio.get_running_loop()
    data = b""
    os.set_blocking(fd, False)
    exited: asyncio.Future[Any] = asyncio.ensure_future(proc.wait())
    while end not in data:
        ready: asyncio.Future[Any] = loop.create_future()
        loop.add_reader(fd, functools.partial(_set_once, ready))
        try:
            await asyncio.wait([ready, exited], timeout=max(0.0, deadline - time.monotonic()),
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            loop.remove_reader(fd)
        if not ready.done():
            what = "exited" if proc.returncode is not None else "did not start in time"
            raise KernelStartError(f"the sandbox {what}")
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            continue
        if not chunk:
            raise KernelStartError("the sandbox exited during startup")
        data += chunk
    return data


def _set_once(future: asyncio.Future[Any]) -> None:
    if not future.done():
        future.set_result(None)


def _inner_process(init: int, inner_pid: int) -> int:
    """The host pid of the child of bubblewrap's init (``init``, a host pid) that the
    sandbox numbers ``inner_pid``."""
    try:
        children = Path(f"/proc/{init}/task/{init}/children").read_text().split()
    except OSError as exc:
        raise KernelStartError(f"cannot find the sandbox's process: {exc}") from exc
    for child in children:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{child}/status").read_text().splitlines():
                if line.startswith("NSpid:") and line.split()[-1] == str(inner_pid):
                    return int(child)
    raise KernelStartError("cannot find the sandbox's process")


def read_tail(path: Path, limit: int = 2000) -> str:
    """The end of a log file (for error messages); "" when it cannot be read."""
    try:
        return path.read_text(errors="replace")[-limit:]
    except OSError:
        return ""


def fork_unavailable_reason(isolation: str, environment_kernelspec: str | None) -> str | None:
    """Why kernels for this request cannot be forked from a template (None: they can)."""
    if environment_kernelspec:
        return f"kernelspec {environment_kernelspec!r} runs its own command"
    if not hasattr(os, "fork") or not hasattr(os, "pidfd_open") or not os.path.isdir("/proc/self/fd"):
        return "this system has no fork with pidfds (Linux)"
    if isolation == "process" and landlock_abi() < _LANDLOCK_SCOPES_ABI:
        return (f"Landlock ABI {landlock_abi()} < {_LANDLOCK_SCOPES_ABI}: forked kernels under "
                "isolation='process' need it to keep conversations from signalling each other")
    return None
