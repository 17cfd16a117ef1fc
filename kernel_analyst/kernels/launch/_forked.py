"""Kernels forked from a fork point (a template or a checkpoint): how one starts.

:func:`spawn_kernel` asks a fork point for a child, sends it its spec over a fresh
lifeline, and returns a :class:`~._local_kernel.LocalKernel` once it answers. Where the
kernel lives (its directory, cgroup, sandbox) is its :class:`~._place.Place`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
import uuid
from pathlib import Path
from typing import Any, Protocol

import zmq.asyncio
from jupyter_client.connect import write_connection_file

from ..exceptions import KernelStartError
from ..limits import Limits
from ._cgroups import KernelCgroup
from ._local_kernel import LocalKernel, max_message_bytes, wait_ready
from ._place import Place, read_tail
from ._process import ForkedProcess
from ._threads import KERNEL_VARIABLE
from ._wire import Link, socket_pair
from ._zmq import ZmqConnection

log = logging.getLogger(__name__)


class ForkPoint(Protocol):
    """A process that forks kernels: a template or a checkpoint."""

    async def fork(self, child_end: Any, deadline: float, *, threads: int | None = None) -> int:
        """Fork a child that becomes a kernel on the lifeline ``child_end``; its pid as
        the fork point sees it. ``threads``: the size of the child's thread pools (its
        CPU share's), where the fork point sets them."""

    def status_of(self, pid: int) -> asyncio.Future[int]:
        """The exit status of the fork point's child ``pid``, once reported."""

    def lives_in(self, place: Place) -> bool:
        """True when the fork point's process already lives in ``place``."""

    kernel_info: dict[str, Any] | None
    """The ``kernel_info`` reply of the kernels this fork point makes (all alike), once
    one has answered: later kernels are ready without asking it again."""


async def spawn_kernel(point: ForkPoint, place: Place, *, context: zmq.asyncio.Context, limits: Limits,
                       launcher: str, spec: dict[str, Any] | None = None) -> LocalKernel:
    """Fork a kernel from ``point`` into ``place`` and return it ready.

    ``spec`` adds to the process spec (``execution_count``, ``branch``). Raises
    ForkError when the fork point is gone, KernelStartError when the kernel does not
    start; either way no process is left behind and ``place`` is released if nothing
    else holds it.
    """
    place.acquire()  # the kernel's reference, released by its shutdown
    inside = point.lives_in(place)
    try:
        directory = place.kernel_dir()
        conn_file, info = write_connection_file(
            str(directory / "kernel.json"), ip=str(directory / "k"), transport="ipc",
            key=uuid.uuid4().hex.encode())
        log_path = directory / "kernel.log"
        deadline = time.monotonic() + limits.startup_timeout_s
        full = {**place.spec(inside=inside), **(spec or {}),
                "connection": {**info, "key": _text(info["key"])},
                "connection_file": conn_file, "argv": [launcher, "-f", conn_file]}
        lifeline, child = await _fork(point, full, log_path, deadline)
    except BaseException:
        await place.release()
        raise
    proc: ForkedProcess | None = None
    moving: asyncio.Future[None] | None = None
    try:
        proc = await _hello(lifeline, deadline, log_path, point.status_of(child))
        moving = _move(place.moved_by_host(inside=inside), proc.pid)
        await _bound(lifeline, deadline, log_path)
        conn = ZmqConnection(dict(info), context, max_message_bytes=max_message_bytes(limits))
    except BaseException:
        lifeline.close()  # a child still starting ends when its lifeline closes
        if proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        await _settled(moving)
        await place.release()
        raise
    kernel = LocalKernel(proc, place.plan, conn, directory, log_path, place=place, lifeline=lifeline)
    try:
        await wait_ready(kernel, max(0.001, deadline - time.monotonic()), known_info=point.kernel_info)
        if moving is not None:  # in its cgroup before any code of the user's runs
            await moving
    except BaseException:
        await _settled(moving)
        await kernel.shutdown(now=True)
        raise
    point.kernel_info = point.kernel_info or kernel.kernel_info
    place.plan.on_ready()
    return kernel


def _move(cgroup: KernelCgroup | None, pid: int) -> asyncio.Future[None] | None:
    """Move the new kernel ``pid`` into ``cgroup`` in a thread, beside its startup."""
    if cgroup is None:
        return None
    return asyncio.ensure_future(asyncio.to_thread(_move_now, cgroup, pid))


def _move_now(cgroup: KernelCgroup, pid: int) -> None:
    try:
        cgroup.add(pid)
    except OSError as exc:
        raise KernelStartError(f"could not move the kernel into its cgroup: {exc}") from exc


async def _settled(moving: asyncio.Future[None] | None) -> None:
    """Wait out a move that is under way (a thread cannot be cancelled); its error is
    the kernel's start failure, already being raised for another reason."""
    if moving is not None:
        await asyncio.gather(moving, return_exceptions=True)


async def _fork(point: ForkPoint, spec: dict[str, Any], log_path: Path, deadline: float) -> tuple[Link, int]:
    """A new lifeline with the kernel's spec already waiting in it, and the fork."""
    host_end, child_end = socket_pair()
    lifeline = Link(host_end, credentials=True)
    try:
        with open(log_path, "wb") as logf:
            lifeline.send(spec, [logf.fileno()])
        threads = spec["env"].get(KERNEL_VARIABLE)
        return lifeline, await point.fork(child_end, deadline, threads=int(threads) if threads else None)
    except BaseException:
        lifeline.close()
        raise
    finally:
        child_end.close()


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def _hello(lifeline: Link, deadline: float, log_path: Path,
                 status: asyncio.Future[int]) -> ForkedProcess:
    """The kernel's first message: its pid, from the credentials it carries."""
    try:
        message = await lifeline.recv(deadline)
    except asyncio.TimeoutError:
        raise KernelStartError(f"a forked kernel did not start in time.\n{read_tail(log_path)}") from None
    if message is None or message.pid is None:
        raise KernelStartError(f"a forked kernel exited during startup.\n{read_tail(log_path)}")
    return ForkedProcess(message.pid, status)


async def _bound(lifeline: Link, deadline: float, log_path: Path) -> None:
    try:
        message = await lifeline.recv(deadline)
    except asyncio.TimeoutError:
        raise KernelStartError(f"a forked kernel did not bind its sockets in time.\n{read_tail(log_path)}") \
            from None
    if message is None or not message.body.get("bound"):
        raise KernelStartError(f"a forked kernel exited during startup.\n{read_tail(log_path)}")
