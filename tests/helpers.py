"""Small helpers shared by the tests: polling with a deadline, process checks."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from kernel_analyst.kernels.testing import cpu_burners

__all__ = ["cpu_burners", "pid_alive", "wait_until"]


def start_time(pid: int) -> str | None:
    """When ``pid`` started (clock ticks since boot, from /proc), None once it is gone.
    With the pid it names one process, even after the pid is given to another."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[19]
    except (OSError, IndexError):
        return None


def pid_alive(pid: int, started: str | None = None) -> bool:
    """True for a running process (a zombie counts as gone); with ``started`` (its
    :func:`start_time`), only while the pid is still that process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[-1].split()
    except OSError:
        return False
    return fields[0] != "Z" and started in (None, fields[19])


async def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Poll ``predicate`` until it is true or ``timeout`` passes (no fixed sleeps in tests)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.02)
    return predicate()
