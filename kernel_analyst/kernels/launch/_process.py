"""A kernel's child process: started off the event loop, its exit awaited without a thread.

``asyncio.create_subprocess_exec`` forks and waits for the child's ``exec`` inside the
event loop's thread (``subprocess.Popen`` reads its error pipe until then), and a
``preexec_fn`` (cgroup, rlimits) rules out the fast vfork path. With 50 kernels starting
at once on a busy machine those waits ran one after the other, about 80 ms each, while
nothing else in the process could run. Here ``Popen`` runs in a worker thread, and the
exit is watched through a pidfd (Linux 5.3+) registered with the loop; elsewhere a
thread per process waits, as asyncio's own child watcher does.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import os
import subprocess
import threading
from typing import Any

__all__ = ["EXIT_UNKNOWN", "ChildProcess", "ForkedProcess"]

_SPAWN_THREADS = 16  # forks in flight at once (the default executor has cpu_count + 4)


@functools.lru_cache(maxsize=1)
def _spawner() -> concurrent.futures.ThreadPoolExecutor:
    return concurrent.futures.ThreadPoolExecutor(_SPAWN_THREADS, thread_name_prefix="kernel-spawn")


class ChildProcess:
    """A started child process whose exit is a future of the event loop."""

    def __init__(self, popen: subprocess.Popen[bytes], loop: asyncio.AbstractEventLoop) -> None:
        self.popen = popen
        self.pid = popen.pid
        self._exited: asyncio.Future[int] = loop.create_future()
        self._loop = loop
        self._watch()

    @classmethod
    async def spawn(cls, argv: list[str], **popen_options: Any) -> ChildProcess:
        """Start ``argv`` (``subprocess.Popen`` options) in a worker thread."""
        loop = asyncio.get_running_loop()

        def start() -> subprocess.Popen[bytes]:
            return subprocess.Popen(argv, **popen_options)

        popen = await loop.run_in_executor(_spawner(), start)
        return cls(popen, loop)

    @property
    def returncode(self) -> int | None:
        """The exit status once the process has ended and was reaped, else None."""
        return self.popen.returncode

    async def wait(self) -> int:
        """The exit status, once the process has ended."""
        return await asyncio.shield(self._exited)

    # -- watching the exit ----------------------------------------------------------------

    def _watch(self) -> None:
        try:
            fd = os.pidfd_open(self.pid)  # type: ignore[attr-defined,unused-ignore]
        except (AttributeError, OSError):
            threading.Thread(target=self._wait_in_thread, name=f"child-{self.pid}", daemon=True).start()
            return
        self._loop.add_reader(fd, self._on_pidfd, fd)

    def _on_pidfd(self, fd: int) -> None:
        self._loop.remove_reader(fd)
        os.close(fd)
        self._done(self.popen.wait())

    def _wait_in_thread(self) -> None:
        code = self.popen.wait()
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            self._loop.call_soon_threadsafe(self._done, code)

    def _done(self, code: int) -> None:
        if not self._exited.done():
            self._exited.set_result(code)


EXIT_UNKNOWN = 256
"""``returncode`` of a process that ended while nobody could report its status (its
parent was gone too): no real exit code (0-255) or signal (negative) is 256."""
_STATUS_GRACE_S = 1.0


class ForkedProcess:
    """A process this process did not start itself (a kernel forked by a template or a
    checkpoint): its exit is watched through a pidfd, and its status is the one its
    parent reports, when it does (``status``)."""

    def __init__(self, pid: int, status: asyncio.Future[int] | None = None) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._loop = asyncio.get_running_loop()
        self._status = status
        self._exited: asyncio.Future[int] = self._loop.create_future()
        self._fd: int | None = None
        self._watch: asyncio.Future[None] | None = None
        try:
            self._fd = os.pidfd_open(pid)  # type: ignore[attr-defined,unused-ignore]
        except (AttributeError, OSError):
            self._watch = asyncio.ensure_future(self._poll_alive())
            return
        self._loop.add_reader(self._fd, self._on_pidfd)

    def _on_pidfd(self) -> None:
        if self._fd is not None:
            self._loop.remove_reader(self._fd)
            os.close(self._fd)
            self._fd = None
        self._watch = asyncio.ensure_future(self._settle())

    async def _poll_alive(self) -> None:
        while True:
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                break
            except PermissionError:
                pass
            await asyncio.sleep(0.1)
        await self._settle()

    async def _settle(self) -> None:
        code = EXIT_UNKNOWN
        if self._status is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                code = await asyncio.wait_for(asyncio.shield(self._status), _STATUS_GRACE_S)
        if self.returncode is None:
            self.returncode = code
        if not self._exited.done():
            self._exited.set_result(self.returncode)

    async def wait(self) -> int:
        """The exit status (``EXIT_UNKNOWN`` when nobody reported it), once it ended."""
        return await asyncio.shield(self._exited)
