"""Honest endings: every death says why (issue 19, part 2), and each cell's cost.

Real kernels under every isolation level: out of memory (the cgroup's OOM kill, with the
80% warning streamed while the kernel still lived), a ctypes segfault, ``os._exit(3)``,
``kill -9`` from outside (mid-cell and while idle); the cause reaches the Execution, the
notebook cell's metadata and the marker. The diagnosis's other branches (the machine's
OOM killer, a lost connection, a remote kernel) are unit tests on a scripted kernel.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

from kernel_analyst.kernels import Execution, KernelSession, SessionManager
from kernel_analyst.kernels.endings import EndCause, KernelEnding
from kernel_analyst.kernels.launch._memory import MemoryProbe, system_oom_kills
from kernel_analyst.kernels.launch.diagnosis import WARN_FRACTION, CellWatch, diagnose
from kernel_analyst.kernels.testing import FakeKernel

from .conftest import test_limits
from .helpers import pid_alive, wait_until
from .test_sandbox_support import local_kernel

MB = 1024 * 1024
LIMIT_MB = 400
# Grows 20 MB at a time, a little slower than a tight loop, as real work does: the
# warning at 80% can only come before the kill if the host gets to look in between.
GROW = "import time\nchunks = []\nwhile True:\n    chunks.append(b'x' * (20 * 2**20))\n    time.sleep(0.05)"


@contextlib.asynccontextmanager
async def session_at(tmp_path: Path, level: str, **changes: Any) -> AsyncIterator[KernelSession]:
    limits = test_limits(isolation=level, memory_mb=LIMIT_MB, timeout_s=60.0, **changes)
    async with SessionManager(tmp_path / level, limits=limits, pool_size=0) as manager:
        yield await manager.session(f"endings-{level}")


def code_cells(session: KernelSession) -> list[Any]:
    nb = nbformat.read(session.notebook_path, as_version=4)
    nbformat.validate(nb)
    return list(nb.cells)


def kernel_host_pid(session: KernelSession) -> int:
    """The host pid of the ipykernel process (inside bubblewrap under sandbox)."""
    kernel = local_kernel(session)
    if kernel.start_path["path"] == "template":
        return int(kernel.proc.pid)  # a forked kernel: its own host pid, inside the sandbox too
    assert kernel.plan.cgroup is not None
    for pid in kernel.plan.cgroup.pids():
        with contextlib.suppress(OSError):
            if b"ipykernel_launcher" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return pid
    raise AssertionError("no kernel process in the cgroup")


@pytest.mark.parametrize("level", ["none", "process", "sandbox"])
async def test_out_of_memory_says_so_after_a_warning(level: str, tmp_path: Path) -> None:
    async with session_at(tmp_path, level) as s:
        await s.execute("kept = 1")
        warned_alive: list[bool] = []

        def on_output(out: dict[str, Any]) -> None:
            if "memory warning" in str(out.get("text", "")):
                kernel = s.kernel
                warned_alive.append(kernel is not None and kernel.is_alive())

        ex = await s.execute(GROW, on_output=on_output)
        assert ex.status == "died" and ex.state == "lost", ex.events
        assert ex.ending is not None and ex.ending.cause is EndCause.MEMORY_LIMIT, ex.ending
        assert ex.ending.memory_limit_bytes == LIMIT_MB * MB and ex.ending.signal == "SIGKILL"
        assert f"memory limit of {LIMIT_MB} MB" in ex.ending.detail
        assert warned_alive == [True], "one warning, streamed while the kernel still ran"
        warning = [o for o in ex.outputs if "memory warning" in str(o.get("text", ""))]
        assert warning and warning[0]["name"] == "stderr"
        assert ex.peak_memory_bytes is not None and ex.peak_memory_bytes >= WARN_FRACTION * LIMIT_MB * MB
        assert any("memory limit" in e for e in ex.events)
        after = await s.execute("'kept' in dir()")
        assert after.status == "ok" and after.text.strip() == "False", "a fresh kernel"
        cells = code_cells(s)
        died = next(c for c in cells if c.cell_type == "code" and c.source == GROW)
        assert died.metadata["kernel_analyst"]["ending"]["cause"] == "memory_limit"
        marker = [c for c in cells if c.cell_type == "markdown" and "died" in c.source]
        assert marker and "memory limit" in marker[0].source


@pytest.mark.parametrize("level", ["process", "sandbox"])
async def test_crash_exit_and_kill_each_say_why(level: str, tmp_path: Path) -> None:
    async with session_at(tmp_path, level) as s:
        segv = await s.execute("import ctypes\nctypes.string_at(0)")
        assert segv.status == "died" and segv.ending is not None, segv.events
        assert segv.ending.cause is EndCause.SIGNAL and segv.ending.signal == "SIGSEGV"
        assert "SIGSEGV" in segv.ending.detail

        exited = await s.execute("import os\nos._exit(3)")
        assert exited.ending is not None and exited.ending.cause is EndCause.EXIT
        assert exited.ending.exit_code == 3 and "code 3" in exited.ending.detail

        assert (await s.execute("'fresh'")).status == "ok"  # a dead kernel is replaced at the next call
        pid = kernel_host_pid(s)
        started: list[int] = []

        def killed_once_running(out: dict[str, Any]) -> None:
            if not started:
                started.append(1)
                os.kill(pid, signal.SIGKILL)

        killed = await s.execute("import time\nprint('running', flush=True)\ntime.sleep(60)",
                                 on_output=killed_once_running)
        assert killed.status == "died" and killed.ending is not None
        assert killed.ending.cause is EndCause.KILLED and killed.ending.signal == "SIGKILL"
        assert "killed from outside" in killed.ending.detail

        causes = [c.metadata["kernel_analyst"].get("ending", {}).get("cause") for c in code_cells(s)
                  if c.cell_type == "code"]
        assert causes == ["signal", "exit", None, "killed"]


async def test_idle_death_names_its_cause(tmp_path: Path) -> None:
    async with session_at(tmp_path, "process") as s:
        await s.execute("x = 1")
        pid = kernel_host_pid(s)
        os.kill(pid, signal.SIGKILL)
        assert await wait_until(lambda: s.kernel is not None and not s.kernel.is_alive())
        ex = await s.execute("'after'")
        assert ex.status == "ok" and ex.state == "lost"
        assert ex.ending is not None and ex.ending.cause is EndCause.KILLED
        marker = [c for c in code_cells(s) if c.cell_type == "markdown" and "idle" in c.source]
        assert marker and "killed from outside by SIGKILL" in marker[0].source
        assert not pid_alive(pid)


async def test_each_cell_records_peak_memory_and_cpu(tmp_path: Path) -> None:
    async with session_at(tmp_path, "process") as s:
        small = await s.execute("1 + 1")
        big = await s.execute("block = bytearray(200 * 2**20)\ndel block\n"
                              "t = __import__('time').process_time()\n"
                              "while __import__('time').process_time() - t < 0.3: pass")
        assert small.peak_memory_bytes is not None and big.peak_memory_bytes is not None
        assert big.peak_memory_bytes >= 200 * MB > small.peak_memory_bytes, "per cell, not per kernel"
        assert big.cpu_time_s is not None and big.cpu_time_s >= 0.3
        assert small.cpu_time_s is not None and small.cpu_time_s < big.cpu_time_s
        meta = [c.metadata["kernel_analyst"] for c in code_cells(s) if c.cell_type == "code"]
        assert meta[1]["peak_memory_bytes"] == big.peak_memory_bytes and meta[1]["cpu_time_s"] >= 0.3
        again = Execution.from_dict(big.to_dict())
        assert (again.peak_memory_bytes, again.cpu_time_s) == (big.peak_memory_bytes, big.cpu_time_s)


# -- the diagnosis, branch by branch, on a scripted kernel -------------------------------


class _Probe(MemoryProbe):
    def __init__(self, *, held: int | None, limit: int | None, oom: int | None,
                 at_limit: bool | None) -> None:
        self.limit = limit
        self._held, self._oom, self._at_limit = held, oom, at_limit

    def held(self) -> int | None:
        return self._held

    def oom_kills(self) -> int | None:
        return self._oom

    def limit_reached(self) -> bool | None:
        return self._at_limit


class _EndedKernel(FakeKernel):
    def __init__(self, status: int | None, probe: MemoryProbe | None) -> None:
        super().__init__()
        self.status, self.probe = status, probe

    def exit_status(self) -> int | None:
        return self.status

    def memory_probe(self) -> MemoryProbe | None:
        return self.probe


def _diagnosed(status: int | None, probe: MemoryProbe | None = None, *, sampled: bool = True,
               failure: str | None = None, oom_base: int | None = None) -> KernelEnding:
    kernel = _EndedKernel(status, probe)
    watch = CellWatch(kernel, warn=lambda text: None)
    if sampled and probe is not None:
        watch.sample()
    if oom_base is not None:
        watch.system_oom_base = oom_base
    return diagnose(kernel, watch=watch, failure=failure)


def test_diagnosis_of_every_cause() -> None:
    limit = 1000 * MB
    at_limit = _diagnosed(-9, _Probe(held=950 * MB, limit=limit, oom=1, at_limit=True))
    assert at_limit.cause is EndCause.MEMORY_LIMIT
    assert "an out-of-memory kill in its cgroup" in at_limit.detail
    machine = _diagnosed(-9, _Probe(held=100 * MB, limit=limit, oom=1, at_limit=False))
    assert machine.cause is EndCause.SYSTEM_OOM and "below its own 1,000 MB limit" in machine.detail
    no_counter = _diagnosed(-9, _Probe(held=980 * MB, limit=limit, oom=None, at_limit=None))
    assert no_counter.cause is EndCause.MEMORY_LIMIT and "as it reached it" in no_counter.detail
    base = system_oom_kills()
    if base is not None:  # a machine-wide OOM kill during the cell, and no cgroup to count ours
        guessed = _diagnosed(-9, _Probe(held=10 * MB, limit=None, oom=None, at_limit=None), oom_base=base - 1)
        assert guessed.cause is EndCause.SYSTEM_OOM and "probably" in guessed.detail
    outside = _diagnosed(-15, _Probe(held=10 * MB, limit=limit, oom=0, at_limit=False))
    assert outside.cause is EndCause.KILLED and outside.signal == "SIGTERM"
    abort = _diagnosed(-6, None)
    assert abort.cause is EndCause.SIGNAL and abort.signal == "SIGABRT"
    assert _diagnosed(0, None).cause is EndCause.EXIT
    lost = _diagnosed(None, None, failure="reader stopped")
    assert lost.cause is EndCause.CONNECTION_LOST and "reader stopped" in lost.detail
    assert _diagnosed(None, None).cause is EndCause.UNKNOWN
    assert KernelEnding.from_dict(at_limit.to_dict()) == at_limit


def test_a_status_nobody_reported_is_unknown_not_a_signal() -> None:
    """A forked kernel whose template was killed (this sitting's DSEval run: ``pkill`` of the
    templates) had its unreported status read as bubblewrap's 128 + n: "killed from outside
    by signal 128"."""
    from kernel_analyst.kernels.launch._local_kernel import exit_status
    from kernel_analyst.kernels.launch._process import EXIT_UNKNOWN

    assert exit_status(EXIT_UNKNOWN, "sandbox") is None and exit_status(EXIT_UNKNOWN, "clean") is None
    assert _diagnosed(exit_status(EXIT_UNKNOWN, "sandbox"), None).cause is EndCause.UNKNOWN
    assert exit_status(128 + 9, "sandbox") == -9 and exit_status(137, "clean") == 137
    assert exit_status(-15, "clean") == -15 and exit_status(None, "sandbox") is None


def test_warning_once_past_the_share() -> None:
    warnings: list[str] = []
    probe = _Probe(held=700 * MB, limit=1000 * MB, oom=0, at_limit=False)
    watch = CellWatch(_EndedKernel(None, probe), warn=warnings.append)
    watch.sample()
    assert warnings == []
    probe._held = 850 * MB
    watch.sample()
    watch.sample()
    assert len(warnings) == 1 and "850 MB of its 1,000 MB limit (85%)" in warnings[0]
    assert watch.peak_bytes == 850 * MB
