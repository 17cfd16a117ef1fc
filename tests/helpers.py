"""Small helpers shared by the tests: polling with a deadline, process checks."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from kernel_analyst.kernels.testing import cpu_burners

__all__ = ["cpu_burners", "pid_alive", "wait_until"]


def pid_alive(pid: int) -> bool:
    """True for a running process (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


async def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Poll ``predicate`` until it is true or ``timeout`` passes (no fixed sleeps in tests)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.02)
    return predicate()
