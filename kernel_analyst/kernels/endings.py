"""Why a kernel ended, as data: :class:`EndCause` and :class:`KernelEnding`.

A kernel that dies during a cell (or while idle) leaves the session an exit status and
what was measured while the cell ran; ``launch/diagnosis.py`` turns those into a
:class:`KernelEnding`: a typed cause, the facts behind it, and one line that the model
and the user read (``Execution.ending``, the cell's metadata, the marker in the
notebook). The causes:

- **killed at the memory limit**: the kernel's memory cgroup counted an OOM kill while
  its usage was at the limit (``memory.events`` / ``memory.oom_control``), or, where no
  cgroup counts kills, the kill signal came with the last measurement at the limit;
- **the machine's OOM killer**: an OOM kill below the kernel's own limit;
- **a crash** with its signal (``SIGSEGV`` in a C extension, ``SIGABRT`` ...);
- **an exit** with its code (``os._exit(3)``);
- **killed from outside** (``kill -9``, ``SIGTERM``): a signal with no OOM kill counted;
- **the connection failed** (the process may still run; it is replaced), or **unknown**
  where the backend cannot say (a remote gateway kernel).

Value types only: this module imports nothing, so everything can import it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any


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


__all__ = ["EndCause", "KernelEnding"]
