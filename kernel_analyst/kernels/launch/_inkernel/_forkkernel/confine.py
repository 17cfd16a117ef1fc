"""Confining a forked kernel: joining its conversation's sandbox, dropping privileges, the
system-call filter, Landlock."""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import socket
from typing import NoReturn

from .state import (
    PR_CAP_AMBIENT,
    PR_CAP_AMBIENT_CLEAR_ALL,
    PR_CAPBSET_DROP,
    PR_SET_NO_NEW_PRIVS,
    check,
    clib,
    prctl,
)

_NS_FLAGS = {"mnt": 0x00020000, "ipc": 0x08000000, "uts": 0x04000000, "net": 0x40000000,
             "cgroup": 0x02000000, "pid": 0x20000000, "user": 0x10000000}
_NS_GET_USERNS = 0xB701
_NS_GET_PARENT = 0xB702


def enter(holder: int, lifeline: socket.socket) -> None:
    """Join the namespaces of the sandbox whose process is ``holder`` (a host pid), as
    bubblewrap would have started this process there, then fork: the child (returned
    to) is in the sandbox's PID namespace; this process waits for it and ends with its
    exit status."""
    import fcntl

    fds = {name: os.open(f"/proc/{holder}/ns/{name}", os.O_RDONLY | os.O_CLOEXEC) for name in _NS_FLAGS}
    try:
        # /proc/self is unusable once the mount namespace is joined (this process is
        # not in the sandbox's PID namespace): know our user namespace from here on.
        current = os.stat("/proc/self/ns/user")
        pending = [name for name in _NS_FLAGS if name != "user"]
        owners = {name: fcntl.ioctl(fds[name], _NS_GET_USERNS) for name in pending}
        try:
            # A namespace can be joined only with privileges over its owner: those owned
            # by our user namespace first (bubblewrap run as root), then each user
            # namespace on the way down, and what it owns.
            for user_fd in [*_userns_path(fds["user"], current), None]:
                for name in [n for n in pending if _same_stat(os.fstat(owners[n]), current)]:
                    check(clib().setns(fds[name], _NS_FLAGS[name]), f"setns({name})")
                    pending.remove(name)
                if user_fd is not None:
                    check(clib().setns(user_fd, _NS_FLAGS["user"]), "setns(user)")
                    current = os.fstat(user_fd)
                    os.close(user_fd)
            if pending or not _same_stat(current, os.fstat(fds["user"])):
                raise OSError(errno.EPERM, f"could not join the sandbox's namespaces: {pending}")
        finally:
            for fd in owners.values():
                os.close(fd)
    finally:
        for fd in fds.values():
            os.close(fd)
    # Joining the mount namespace made its root (bubblewrap's new root) this process's
    # root and working directory.
    child = os.fork()
    if child == 0:
        os.setsid()  # its own process group again (the session above is the outer process's)
        _drop_privileges()
        return
    _wait_and_report(child, lifeline)


def _fd_ceiling() -> int:
    import resource

    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if 0 < soft < 1 << 20 else 1 << 16


def _same_stat(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _userns_path(target: int, own: os.stat_result) -> list[int]:
    """User namespaces from the one below ours (``own``) down to ``target``, outermost
    first (new descriptors, closed by the caller)."""
    import fcntl

    chain = [os.dup(target)]
    while not _same_stat(os.fstat(chain[-1]), own):
        try:
            chain.append(fcntl.ioctl(chain[-1], _NS_GET_PARENT))
        except OSError:
            for fd in chain:
                os.close(fd)
            raise OSError(errno.EPERM, "the sandbox's user namespace is not below ours") from None
    os.close(chain.pop())  # our own
    return list(reversed(chain))


def _drop_privileges() -> None:
    """No capabilities left in any set, and no way to gain any (what bubblewrap gives
    the processes it starts)."""
    with open("/proc/sys/kernel/cap_last_cap") as f:
        last = int(f.read())
    for cap in range(last + 1):
        clib().prctl(PR_CAPBSET_DROP, ctypes.c_ulong(cap), 0, 0, 0)
    clib().prctl(PR_CAP_AMBIENT, ctypes.c_ulong(PR_CAP_AMBIENT_CLEAR_ALL), 0, 0, 0)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    header, data = Header(0x20080522, 0), (Data * 2)()
    check(clib().capset(ctypes.byref(header), data), "capset")
    prctl(PR_SET_NO_NEW_PRIVS, 1)


def _wait_and_report(child: int, lifeline: socket.socket) -> NoReturn:
    """The process outside the sandbox that started ``child`` in it: wait for it and end
    with its status, which the fork point reports to the host as the kernel's."""
    code = 1
    try:
        # Not open_fds(): /proc/self does not resolve once the sandbox's mount namespace
        # is joined (this process stays outside its PID namespace).
        os.closerange(3, _fd_ceiling())
        _, status = os.waitpid(child, 0)
        code = os.waitstatus_to_exitcode(status)
        if code < 0:  # end by the same signal, so the status reads the same
            signal.signal(-code, signal.SIG_DFL)
            os.kill(os.getpid(), -code)
    except BaseException:
        pass
    finally:
        os._exit(code if code >= 0 else 128 - code)


# Landlock: scope signals and abstract Unix sockets to this conversation's processes
# (ABI 6). Any Landlock domain also keeps its processes from tracing, or reading the
# sensitive /proc files of, processes outside it.
_LANDLOCK_SCOPE = 0x1 | 0x2  # ABSTRACT_UNIX_SOCKET | SIGNAL


def landlock_scope() -> None:
    class Attr(ctypes.Structure):
        _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]

    attr = Attr(0, 0, _LANDLOCK_SCOPE)
    libc = clib()
    fd = check(libc.syscall(444, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), 0),
                "landlock_create_ruleset")
    try:
        prctl(PR_SET_NO_NEW_PRIVS, 1)
        check(libc.syscall(446, fd, 0), "landlock_restrict_self")
    finally:
        os.close(fd)


# seccomp: the filter the host compiled with libseccomp (launch/_seccomp.py), loaded as
# bubblewrap loads it for a cold kernel. no_new_privs is set by then (_drop_privileges).
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2


def seccomp_filter(program: bytes) -> None:
    """Load the BPF ``program`` (``struct sock_filter`` entries) as this process's
    seccomp filter; every thread and child it makes from here on inherits it."""

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    code = ctypes.create_string_buffer(program, len(program))
    fprog = Program(len(program) // 8, ctypes.addressof(code))
    check(clib().prctl(PR_SET_SECCOMP, ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(fprog), 0, 0),
          "prctl(PR_SET_SECCOMP)")
