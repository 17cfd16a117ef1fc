"""Templates: one pre-imported Python process per (interpreter, isolation level) from
which new kernels are forked (``_inkernel/_forkkernel/`` is the template's own side).

A template has imported IPython, ipykernel and the preload list and built a kernel
object with the startup files run, but holds no ZMQ context, thread or user file. It is
a child of this process that dies with it; the kernels forked from it are not tied to
it: a template that dies is started again at the next request, and the kernels it made
keep running (their exit status is then unknown, see ``ForkedProcess``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..exceptions import ForkError, KernelStartError
from . import sandbox
from ._inkernel import FORK_PACKAGE
from ._process import ChildProcess
from ._wire import ChildLedger, Link, socket_pair

log = logging.getLogger(__name__)

_tokens = itertools.count(1)


@dataclass(frozen=True)
class TemplateKey:
    """What makes two templates differ."""

    python: str
    """The interpreter."""
    isolation: str
    """``none`` (the host's environment) or another level (a clean one)."""


class TemplateProcess:
    """One running template and its control socket."""

    def __init__(self, key: TemplateKey, preload: tuple[str, ...], startup: tuple[Path, ...]) -> None:
        self.key = key
        self.preload = preload
        self.startup = startup
        self.info: dict[str, Any] = {}
        """The template's report when it became ready (pid, versions)."""
        self.proc: ChildProcess | None = None
        self._channel: Link | None = None
        self._reader: asyncio.Task[None] | None = None
        self._children = ChildLedger()
        self.kernel_info: dict[str, Any] | None = None
        """The kernel_info reply of its kernels, once the first one answered (all alike)."""
        self._home = Path(tempfile.mkdtemp(prefix="ka-tpl-"))
        self._closed = False

    @property
    def alive(self) -> bool:
        """True while the template answers."""
        return self._channel is not None and not self._channel.closed and self.proc is not None \
            and self.proc.returncode is None

    async def start(self, timeout: float) -> None:
        """Start the template and wait until it has imported everything."""
        host_end, child_end = socket_pair()
        argv = [self.key.python, str(FORK_PACKAGE), "template", str(child_end.fileno()),
                ",".join(self.preload), *map(str, self.startup)]
        try:
            with open(self._home / "template.log", "ab") as logf:
                self.proc = await ChildProcess.spawn(
                    argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                    cwd=self._home, env=self._environment(), pass_fds=(child_end.fileno(),),
                    start_new_session=True)
        except OSError as exc:
            host_end.close()
            raise ForkError(f"could not run {self.key.python!r}: {exc}", permanent=True) from exc
        finally:
            child_end.close()
        self._channel = Link(host_end)
        try:
            ready = await self._channel.recv(time.monotonic() + timeout)
        except asyncio.TimeoutError:
            await self.aclose()
            raise ForkError(f"the template did not start within {timeout:g} s") from None
        except BaseException:  # cancelled (its backend closed while it started): leave nothing
            self._closed = True
            self._channel.close()
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(self.proc.wait(), 5.0)
            shutil.rmtree(self._home, ignore_errors=True)
            raise
        if ready is None or not ready.body.get("ready"):
            reason = ready.body.get("reason") if ready is not None else None
            await self.aclose()
            raise ForkError(str(reason or f"the template exited: {self.log_tail()}"),
                            permanent=reason is not None)
        self.info = ready.body
        self._reader = asyncio.create_task(self._read(), name="template-reader")
        log.info("template ready: %s (pid %s, ipykernel %s)", self.key, self.info.get("pid"),
                 self.info.get("ipykernel"))

    def _environment(self) -> dict[str, str]:
        level = "none" if self.key.isolation == "none" else "process"
        extra = {"PYTHONHASHSEED": "0", "PYDEVD_DISABLE_FILE_VALIDATION": "1",
                 "MPLBACKEND": "module://matplotlib_inline.backend_inline",
                 "IPYTHONDIR": str(self._home / "ipython")}
        env = sandbox.kernel_environment(level, self._home, extra)
        env["HOME"] = str(self._home)
        if level != "none" and self.key.python == sandbox.current_python():
            cache = sandbox.matplotlib_cache(self.key.python)
            if cache is not None:
                env["MPLCONFIGDIR"] = str(cache)
        return env

    async def _read(self) -> None:
        assert self._channel is not None
        await self._children.follow(self._channel)
        self._gone()

    def _gone(self) -> None:
        if not self._closed:
            log.warning("template %s ended (%s); the next kernel starts a new one", self.key,
                        self.log_tail(300) or "no output")
        self._children.end(ForkError("the template ended while forking a kernel"))
        if self._channel is not None:
            self._channel.close()

    def status_of(self, pid: int) -> asyncio.Future[int]:
        """The exit status of the template's child ``pid``, once the template reports it."""
        return self._children.status_of(pid)

    async def fork(self, child_end: socket.socket, deadline: float, *, threads: int | None = None) -> int:
        """Fork a child that becomes a kernel on the lifeline ``child_end``; its pid.
        ``threads``: the size of its thread pools (None: the template's own, one thread
        per core), set in the template just before the fork (``_forkkernel/pools.py``)."""
        if not self.alive or self._channel is None:
            raise ForkError("the template is not running")
        token = str(next(_tokens))
        waiter = self._children.expect(token)
        try:
            self._channel.send({"spawn": token, "threads": threads}, [child_end.fileno()])
        except OSError as exc:
            self._children.spawns.pop(token, None)
            raise ForkError(f"the template is not reachable: {exc}") from exc
        try:
            return await asyncio.wait_for(waiter, max(0.0, deadline - time.monotonic()))
        except asyncio.TimeoutError:
            raise KernelStartError("the template did not fork a kernel in time") from None
        finally:
            self._children.spawns.pop(token, None)

    def lives_in(self, place: Any) -> bool:
        """A template lives in no place: every kernel enters its own."""
        return False

    def log_tail(self, limit: int = 2000) -> str:
        """The end of the template's own output."""
        try:
            return (self._home / "template.log").read_text(errors="replace")[-limit:]
        except OSError:
            return ""

    async def aclose(self) -> None:
        """End the template (its kernels keep running)."""
        self._closed = True
        if self._channel is not None:
            self._channel.close()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.proc.wait(), 2.0)
            if self.proc.returncode is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                await self.proc.wait()
        shutil.rmtree(self._home, ignore_errors=True)


class Templates:
    """The templates of one backend, started on first use and again after a death."""

    def __init__(self, preload: tuple[str, ...], startup: tuple[Path, ...]) -> None:
        self.preload = preload
        self.startup = startup
        self.restarts = 0
        """How many times a template was started again after it ended."""
        self._live: dict[TemplateKey, TemplateProcess] = {}
        self._starting: dict[TemplateKey, asyncio.Future[TemplateProcess]] = {}
        self._unavailable: dict[TemplateKey, str] = {}

    def unavailable(self, key: TemplateKey) -> str | None:
        """Why ``key`` cannot have a template (None: it can, as far as is known)."""
        return self._unavailable.get(key)

    async def get(self, key: TemplateKey, timeout: float) -> TemplateProcess:
        """The running template for ``key``, started (or started again) if needed."""
        reason = self._unavailable.get(key)
        if reason is not None:
            raise ForkError(reason, permanent=True)
        live = self._live.get(key)
        if live is not None and live.alive:
            return live
        starting = self._starting.get(key)
        if starting is None:
            # registered before any await: callers that come meanwhile wait for this start
            # instead of each starting (and counting) a template of their own
            if live is not None:
                self.restarts += 1
            starting = self._starting[key] = asyncio.ensure_future(self._start(key, timeout, ended=live))
        return await asyncio.shield(starting)

    async def _start(self, key: TemplateKey, timeout: float,
                     ended: TemplateProcess | None = None) -> TemplateProcess:
        template = TemplateProcess(key, self.preload, self.startup)
        try:
            if ended is not None:
                await ended.aclose()
            await template.start(timeout)
        except ForkError as exc:
            if exc.permanent:
                self._unavailable[key] = str(exc)
            raise
        finally:
            self._starting.pop(key, None)
        self._live[key] = template
        return template

    def warm(self, key: TemplateKey, timeout: float) -> None:
        """Start ``key``'s template in the background (the first kernel waits less)."""
        if key in self._live or key in self._starting or key in self._unavailable:
            return
        task = asyncio.ensure_future(self.get(key, timeout))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())

    def describe(self) -> list[dict[str, Any]]:
        """Each template: its key, pid and whether it runs."""
        return [{"python": k.python, "isolation": k.isolation, "pid": t.info.get("pid"), "alive": t.alive}
                for k, t in self._live.items()]

    async def aclose(self) -> None:
        """End every template (kernels forked from them keep running until closed)."""
        for starting in list(self._starting.values()):
            starting.cancel()
        await asyncio.gather(*self._starting.values(), return_exceptions=True)
        live, self._live = list(self._live.values()), {}
        await asyncio.gather(*(t.aclose() for t in live), return_exceptions=True)
