"""What this process knows about itself, and the small system calls every part uses."""

from __future__ import annotations

import ctypes
import os
import socket
from typing import Any


class State:
    """What this process knows about itself (module-level, inherited by every fork)."""

    def __init__(self) -> None:
        self.app: Any = None
        """The IPKernelApp (built once, in the template; rebound in every kernel)."""
        self.helper: Any = None
        """The startup file's helper (``_kernel_analyst``) of this shell."""
        self.lifeline: socket.socket | None = None
        """This kernel's lifeline to the host (None outside a kernel)."""
        self.loop: Any = None
        """This kernel's event loop (its main thread's), where checkpoints are taken."""
        self.kept_fds: set[int] = set()
        """User descriptors this kernel inherited from its checkpoint (kept on purpose)."""
        self.infra_fds: set[int] | None = None
        """Descriptors of this kernel's own machinery (ZMQ, event loops, output pipes),
        recorded when the first cell starts (no user code has run before it)."""
        self.threads: set[int] = set()
        """Idents of the kernel's own threads (ipykernel's and the lifeline watcher)."""
        self.offsets: dict[int, int] = {}
        """File offsets of the kept descriptors at the time of the checkpoint."""
        self.pools: Any = None
        """threadpoolctl's view of the loaded BLAS and OpenMP libraries (built in the
        template, where threadpoolctl is installed; ``pools.py``)."""
        self.leaked: list[Any] = []
        """Objects of an earlier kernel generation (ZMQ context, sockets, loops): kept
        referenced forever, so no finaliser ever touches them."""


STATE = State()


_libc: Any = None


def clib() -> Any:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def check(result: int, what: str) -> int:
    if result < 0 or (result != 0 and what.startswith("prctl")):
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4


def prctl(option: int, arg: int) -> None:
    check(clib().prctl(option, ctypes.c_ulong(arg), 0, 0, 0), f"prctl({option})")



def close_fd(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


def open_fds() -> set[int]:
    """Descriptors open now (not counting the one used to list them)."""
    listing = os.open("/proc/self/fd", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return {int(name) for name in os.listdir(listing)} - {listing}
    finally:
        os.close(listing)
