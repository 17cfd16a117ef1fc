"""Why a kernel process ended, and what it held while a cell ran: the host's measurements.

A backend reports only a process's exit status and a memory probe
(``RunningKernel.exit_status`` / ``memory_probe``); the logic that reads them lives here,
so it holds for whatever starts the kernel. :func:`diagnose` turns an ending into a
:class:`~kernel_analyst.kernels.endings.KernelEnding` (the causes are listed there).

While a cell runs, :class:`CellWatch` samples the memory the kernel's processes hold
(local kernels: their cgroup, else ``/proc``; more often as the limit nears) and, once
past :data:`WARN_FRACTION` of an enforced limit, streams a warning into the cell as
``stderr``, before the kernel is killed. The cell's peak memory and CPU time combine the
kernel's own figures (``_inkernel/startup.py``: ``getrusage`` and ``VmHWM``, reset before
each cell) with these samples (``conversation/cell.py``: ``record_usage``).
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable

from ..endings import EndCause, KernelEnding
from ._memory import MemoryProbe, system_oom_kills
from .base import RunningKernel

log = logging.getLogger(__name__)

WARN_FRACTION = 0.8
"""A cell whose kernel holds this share of its memory limit gets one warning (stderr)."""
_AT_LIMIT = 0.9  # a last measurement this close to the limit counts as "at the limit"
_SLOW_S, _FAST_S, _FASTEST_S = 0.5, 0.1, 0.05  # sampling intervals as the limit nears
_MB = 1024 * 1024

_CRASHES = {
    "SIGSEGV": "a segmentation fault: compiled code (a C extension) read or wrote memory it must not",
    "SIGBUS": "a bus error: compiled code touched memory that is not there (a truncated mapped file)",
    "SIGABRT": "an abort: compiled code stopped the process (a failed check or a fatal error in a "
               "C library)",
    "SIGFPE": "an arithmetic error in compiled code (an integer division by zero)",
    "SIGILL": "an illegal instruction: compiled code this CPU cannot run",
    "SIGSYS": "a forbidden system call",
    "SIGTRAP": "a breakpoint or trap in compiled code",
}


def _mb(value: int) -> str:
    return f"{value / _MB:,.0f} MB"


# -- while a cell runs ----------------------------------------------------------------


class CellWatch:
    """Samples the kernel's memory while one cell runs; warns once near the limit.

    ``async with CellWatch(kernel, warn=...)``: nothing is sampled where the kernel has
    no memory probe (a remote kernel). ``warn`` receives the warning text (the session
    adds it to the cell's output as ``stderr``).
    """

    def __init__(self, kernel: RunningKernel, *, warn: Callable[[str], None]) -> None:
        self.probe: MemoryProbe | None = kernel.memory_probe()
        self.limit = self.probe.limit if self.probe is not None else None
        """The enforced memory limit in bytes (None: none known)."""
        self.peak_bytes: int | None = None
        """The most the kernel's processes held at any sample."""
        self.last_bytes: int | None = None
        """What they held at the latest sample."""
        self.warned = False
        """True once the warning was given."""
        counted = self.probe is not None and self.probe.counts_oom_kills()
        self.system_oom_base = None if counted else system_oom_kills()
        """The machine's OOM kills before the cell, where the probe does not count this
        kernel's (``diagnose`` then compares)."""
        self._warn = warn
        self._timer: asyncio.Handle | None = None  # a timer, not a task: nothing to await per cell

    async def __aenter__(self) -> CellWatch:
        if self.probe is not None:
            # The first sample is taken as soon as the loop runs again: the caller sends
            # the cell's request before it next waits, so the kernel starts the cell
            # while this process reads its memory, not after.
            self._timer = asyncio.get_running_loop().call_soon(self._tick)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def sample(self) -> None:
        """Take one measurement (and warn, once, past :data:`WARN_FRACTION`)."""
        assert self.probe is not None
        held = self.probe.held()
        if held is None:
            return
        self.last_bytes = held
        self.peak_bytes = held if self.peak_bytes is None else max(self.peak_bytes, held)
        if self.limit and not self.warned and held >= WARN_FRACTION * self.limit:
            self.warned = True
            self._warn(memory_warning(held, self.limit))

    def _interval(self) -> float:
        share = (self.last_bytes or 0) / self.limit if self.limit else 0.0
        return _SLOW_S if share < 0.5 else _FAST_S if share < 0.7 else _FASTEST_S

    def _tick(self) -> None:
        if self._timer is None:
            return
        try:
            self.sample()
        except Exception:  # a probe that fails says nothing more; the cell goes on
            log.debug("memory sample failed", exc_info=True)
            self._timer = None
            return
        self._timer = asyncio.get_running_loop().call_later(self._interval(), self._tick)


def memory_warning(held: int, limit: int) -> str:
    """The warning a cell streams when its kernel nears the memory limit."""
    return (f"[kernel-analyst] memory warning: the kernel holds {_mb(held)} of its {_mb(limit)} limit "
            f"({held / limit:.0%}). At the limit it is killed and every variable is lost: free memory "
            "(del large objects) or work in smaller pieces.\n")


# -- after the end --------------------------------------------------------------------


def diagnose(kernel: RunningKernel, *, watch: CellWatch | None = None,
             failure: str | None = None) -> KernelEnding:
    """Why ``kernel`` ended (call before it is shut down: its cgroup still holds the counts).

    ``watch`` is the ending cell's (its last measurement); ``failure`` the reason a
    connection failed, when that was how the cell ended.
    """
    status = kernel.exit_status()
    probe = watch.probe if watch is not None else kernel.memory_probe()
    held = watch.last_bytes if watch is not None else None
    limit = probe.limit if probe is not None else None

    def ending(cause: EndCause, detail: str, name: str | None = None) -> KernelEnding:
        code = status if status is not None and status >= 0 else None
        return KernelEnding(cause, detail, signal=name, exit_code=code, memory_bytes=held,
                            memory_limit_bytes=limit)

    if status is None:
        if failure is not None:
            return ending(EndCause.CONNECTION_LOST, f"the connection to the kernel failed ({failure})")
        return ending(EndCause.UNKNOWN, "the kernel ended; where it ran does not say why")
    if status >= 0:
        return ending(EndCause.EXIT, _exit_detail(status))
    name = _signal_name(-status)
    oom_kills = probe.oom_kills() if probe is not None else None
    if oom_kills or (name == "SIGKILL" and _near(held, limit)):
        at_limit = _near(held, limit) or bool(probe is not None and probe.limit_reached())
        return ending(*_oom(at_limit, held, limit, counted=bool(oom_kills)), name)
    base = watch.system_oom_base if watch is not None else None
    now = system_oom_kills()
    if name == "SIGKILL" and oom_kills is None and base is not None and now is not None and now > base:
        return ending(*_oom(False, held, limit, counted=False), name)
    if name in _CRASHES:
        return ending(EndCause.SIGNAL, f"the kernel crashed with {name}, {_CRASHES[name]}", name)
    usage = f"; it held {_mb(held)}" + (f" of its {_mb(limit)} limit" if limit else "") if held else ""
    return ending(EndCause.KILLED, f"the kernel was killed from outside by {name}, not for memory{usage}",
                  name)


def _oom(at_limit: bool, held: int | None, limit: int | None, *, counted: bool) -> tuple[EndCause, str]:
    last = f"; {_mb(held)} at the last measurement" if held is not None else ""
    if at_limit and limit:
        how = "an out-of-memory kill in its cgroup" if counted else "killed as it reached it"
        return (EndCause.MEMORY_LIMIT,
                f"the kernel was killed at its memory limit of {_mb(limit)} ({how}{last})")
    hedge = "" if counted else "probably "
    below = f", below its own {_mb(limit)} limit" if limit else ""
    return (EndCause.SYSTEM_OOM, f"the kernel was {hedge}killed by the machine's out-of-memory killer: the "
            f"machine ran out of memory{below}{last}")


def _near(held: int | None, limit: int | None) -> bool:
    return held is not None and bool(limit) and held >= _AT_LIMIT * (limit or 0)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _exit_detail(code: int) -> str:
    if code == 0:
        return ("the kernel process exited normally (code 0): the code ended it (exit(), quit(), "
                "os._exit(0) or sys.exit from a thread)")
    return (f"the kernel process exited with code {code}: the code, or a library it called, ended "
            "the process (with os._exit() or after a fatal error)")


__all__ = ["WARN_FRACTION", "CellWatch", "diagnose", "memory_warning"]
