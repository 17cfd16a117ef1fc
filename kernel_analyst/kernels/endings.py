"""Why a kernel ended, and what each cell cost: honest endings.

A kernel that dies during a cell leaves the session only an exit status and what was
measured while the cell ran. This module turns those into a :class:`KernelEnding`: a
typed cause (:class:`EndCause`), the facts behind it, and one line that the model and the
user read (``Execution.ending``, the cell's metadata, the marker in the notebook):

- **killed at the memory limit**: the kernel's memory cgroup counted an OOM kill while
  its usage was at the limit (``memory.events`` / ``memory.oom_control``), or, where no
  cgroup counts kills, the kill signal came with the last measurement at the limit;
- **the machine's OOM killer**: an OOM kill below the kernel's own limit;
- **a crash** with its signal (``SIGSEGV`` in a C extension, ``SIGABRT`` ...);
- **an exit** with its code (``os._exit(3)``);
- **killed from outside** (``kill -9``, ``SIGTERM``): a signal with no OOM kill counted;
- **the connection failed** (the process may still run; it is replaced), or **unknown**
  where the backend cannot say (a remote gateway kernel).

While a cell runs, :class:`CellWatch` samples the memory the kernel's processes hold
(local kernels: their cgroup, else ``/proc``; more often as the limit nears) and, once
past :data:`WARN_FRACTION` of an enforced limit, streams a warning into the cell as
``stderr``, before the kernel is killed. After the cell, :func:`record_usage` sets the
cell's peak memory and CPU time: the kernel measures its own CPU time and peak resident
memory per cell (``_kernel_startup.py``: ``getrusage`` and ``VmHWM``, reset before each
cell), and the host's samples add the rest of the process tree and the last figure
before a death. The logic lives here, so it holds for whatever starts the kernel: a
backend only reports the process's exit status and a memory probe
(``RunningKernel.exit_status`` / ``memory_probe``).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._memory import MemoryProbe, system_oom_kills

if TYPE_CHECKING:
    from .backends.base import RunningKernel
    from .execution import Execution

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


class EndCause(str, enum.Enum):
    """Why a kernel process ended (the value is what JSON and the notebook carry)."""

    MEMORY_LIMIT = "memory_limit"
    """Killed for memory at the kernel's own limit (``Limits.memory_mb``)."""
    SYSTEM_OOM = "system_oom"
    """Killed by the machine's out-of-memory killer, below the kernel's own limit."""
    SIGNAL = "signal"
    """Crashed with a signal of its own making (``SIGSEGV``, ``SIGABRT`` ...)."""
    EXIT = "exit"
    """Exited with an exit code (``os._exit``, a library ending the process)."""
    KILLED = "killed"
    """Killed from outside by a signal (``kill -9``, ``SIGTERM``), not for memory."""
    CONNECTION_LOST = "connection_lost"
    """The connection to the kernel failed; the kernel was replaced."""
    UNKNOWN = "unknown"
    """The kernel ended and where it ran does not say why (a remote gateway)."""


@dataclass(frozen=True)
class KernelEnding:
    """Why the kernel ended during (or just before) one execution."""

    cause: EndCause
    """The cause, typed."""
    detail: str
    """One line saying what happened, for the model and the user."""
    signal: str | None = None
    """The signal that ended the process (``"SIGKILL"``), if one did."""
    exit_code: int | None = None
    """The process's exit code, if it exited."""
    memory_bytes: int | None = None
    """What the kernel's processes held at the last measurement before the end."""
    memory_limit_bytes: int | None = None
    """The memory limit enforced on the kernel (None: none known)."""

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict."""
        return {"cause": self.cause.value, "detail": self.detail, "signal": self.signal,
                "exit_code": self.exit_code, "memory_bytes": self.memory_bytes,
                "memory_limit_bytes": self.memory_limit_bytes}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KernelEnding:
        """Rebuild from :meth:`to_dict` output."""
        return cls(EndCause(data.get("cause", "unknown")), str(data.get("detail", "")),
                   data.get("signal"), data.get("exit_code"), data.get("memory_bytes"),
                   data.get("memory_limit_bytes"))

    def __str__(self) -> str:
        return self.detail


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
        self.system_oom_base = system_oom_kills()
        self._warn = warn
        self._timer: asyncio.TimerHandle | None = None  # a timer, not a task: nothing to await per cell

    async def __aenter__(self) -> CellWatch:
        if self.probe is not None:
            self.sample()
            self._timer = asyncio.get_running_loop().call_later(self._interval(), self._tick)
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


def record_usage(ex: Execution, step: Any, watch: CellWatch | None) -> None:
    """Set ``ex``'s peak memory and CPU time from the kernel's own figures (``step``, the
    cell's bookkeeping expression; absent when it died) and the host's samples."""
    usage = step.get("usage") if isinstance(step, dict) else None
    usage = usage if isinstance(usage, dict) else {}
    peaks = [v for v in (usage.get("peak_rss"), watch.peak_bytes if watch else None) if isinstance(v, int)]
    ex.peak_memory_bytes = max(peaks) if peaks else None
    cpu = usage.get("cpu_s")
    ex.cpu_time_s = float(cpu) if isinstance(cpu, (int, float)) else None


def note_ending(ex: Execution, ending: KernelEnding) -> None:
    """Attach ``ending`` to ``ex`` and say it in its events."""
    ex.ending = ending
    ex.events.append(f"kernel ended: {ending.detail}")


__all__ = ["WARN_FRACTION", "CellWatch", "EndCause", "KernelEnding", "diagnose", "memory_warning",
           "note_ending", "record_usage"]
