"""Helpers shared by the sandbox tests (no tests here).

Every sandbox test submits its cells through :class:`Tracked`, which remembers what was
sent, so it can end by checking case 15 of the issue: the session's audit notebook
validates and holds every submitted cell, in order, with the expected markers.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import nbformat

from kernel_analyst.kernels import Execution, KernelSession, SessionManager
from kernel_analyst.kernels.launch import LocalKernel

from .conftest import test_limits
from .helpers import pid_alive

# Small limits so every failure shows quickly. Memory: 1 GB of real memory per kernel
# (cgroup), which a pandas kernel and a 64-process fork bomb fit in.
SMALL = {
    "timeout_s": 20.0,
    "interrupt_grace_s": 1.0,
    "memory_mb": 1024,
    "max_processes": 64,
    "max_file_size_mb": 16,
    "max_disk_mb": 48,
    "tmp_size_mb": 32,
    "startup_timeout_s": 30.0,
}
LIMITED_LEVELS = ["process", "sandbox"]
ALL_LEVELS = ["none", "process", "sandbox"]


class Tracked:
    """A session plus the list of code cells submitted to it (for the audit check)."""

    def __init__(self, session: KernelSession) -> None:
        self.session = session
        self.codes: list[str] = []
        self.statuses: list[str | None] = []

    async def run(self, code: str, **kwargs: Any) -> Execution:
        """Execute ``code`` and remember it (also when execute raises)."""
        self.codes.append(code)
        self.statuses.append(None)
        ex = await self.session.execute(code, **kwargs)
        self.statuses[-1] = ex.status
        return ex

    def check_audit(self, markers: list[str] | None = None) -> list[Any]:
        """Case 15: the notebook validates, holds every submitted cell in order with the
        status the caller saw, and exactly ``markers`` (marker kinds, in order)."""
        nb = nbformat.read(self.session.notebook_path, as_version=4)
        nbformat.validate(nb)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert [c.source for c in code] == self.codes
        for cell, status in zip(code, self.statuses, strict=True):
            if status is not None:
                assert cell.metadata["kernel_analyst"]["status"] == status
        kinds = [c.metadata.get("kernel_analyst", {}).get("marker") for c in nb.cells
                 if c.cell_type == "markdown"]
        assert [k for k in kinds if k] == (markers or [])
        return list(nb.cells)


def json_line(text: str) -> Any:
    """The JSON object a probe printed on a line of its own (tools a probe runs may print
    around it: the kernel captures output at the file-descriptor level)."""
    lines = [line for line in text.splitlines() if line.startswith("{")]
    assert lines, f"no JSON line in {text[-2000:]!r}"
    return json.loads(lines[-1])


def local_kernel(session: KernelSession) -> LocalKernel:
    """The session's kernel as the local backend's object (for pids and cgroups)."""
    kernel = session.kernel
    assert isinstance(kernel, LocalKernel)
    return kernel


def sleepers(mark: str) -> list[int]:
    """Host pids of running ``sleep <mark>`` processes (whatever namespace they are in)."""
    found = []
    needle = b"sleep\0" + mark.encode() + b"\0"
    for path in glob.glob("/proc/[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            with open(path, "rb") as f:
                if needle in f.read():
                    pid = int(path.split("/")[2])
                    if pid_alive(pid):
                        found.append(pid)
    return found


def rss_mb() -> float:
    """This process's resident memory now."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


ManagerFactory = Callable[..., Awaitable[SessionManager]]


@contextlib.asynccontextmanager
async def manager_factory(tmp_path: Path) -> AsyncIterator[ManagerFactory]:
    """``await factory(level, **limit_changes)``: managers closed when the block ends."""
    async with contextlib.AsyncExitStack() as stack:
        count = 0

        async def factory(level: str, *, pool_size: int = 0, **changes: Any) -> SessionManager:
            nonlocal count
            count += 1
            limits = test_limits(**{**SMALL, "isolation": level, **changes})
            manager = SessionManager(tmp_path / f"m{count}-{level}", limits=limits, pool_size=pool_size)
            return await stack.enter_async_context(manager)

        yield factory


async def tracked(manager: SessionManager, conversation: str) -> Tracked:
    """A tracked new session."""
    return Tracked(await manager.session(conversation))


def host_environ_has(pid: int, secret: str) -> bool:
    """Whether the host process ``pid`` has ``secret`` in its environment."""
    with open(f"/proc/{pid}/environ", "rb") as f:
        return secret.encode() in f.read()


def kernel_pids(session: KernelSession) -> set[int]:
    """Host pids of every process in the kernel's cgroup (its whole tree)."""
    cgroup = local_kernel(session).plan.cgroup
    assert cgroup is not None, "this machine offers cgroups; the kernel should have one"
    return cgroup.pids()


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """True if both paths name the same existing file."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
