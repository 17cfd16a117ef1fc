"""The system-call filter of sandboxed kernels (seccomp), built with libseccomp.

Namespaces share the host's Linux kernel, so every system call a sandboxed kernel makes
reaches it; the calls below are the usual routes of kernel exploits out of a container
(Docker's default profile, gVisor and Firecracker's jailer refuse them too), and a
data-analysis kernel never needs them. They fail with ``EPERM`` (a ``PermissionError``
or an ordinary ``-1`` in the cell; the kernel lives on). Everything else is allowed:
a denylist, as flatpak's, where Docker keeps an allowlist, so that no library of the
data stack is broken by a call nobody listed.

The filter is compiled here, once per process, by libseccomp (through ``pyseccomp``,
its ctypes binding) and exported as BPF: bubblewrap loads it for a cold kernel
(``--seccomp FD``, as flatpak passes the one libseccomp exports), and a kernel forked
into a sandbox loads the same bytes itself before any code of the user's runs
(``_inkernel/_forkkernel/confine.py``). Checkpoints and every child process inherit it.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

REFUSED: dict[str, tuple[str, ...]] = {
    "kernel keyrings": ("keyctl", "add_key", "request_key"),
    "tracing, and other processes' memory and descriptors": (
        "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "kcmp", "pidfd_getfd"),
    "BPF programs and performance counters": ("bpf", "perf_event_open"),
    "page-fault handling in user space": ("userfaultfd",),
    "io_uring": ("io_uring_setup", "io_uring_enter", "io_uring_register"),
    "new namespaces, and joining others": ("unshare", "setns"),
    "mounts and the root directory": (
        "mount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount", "fspick",
        "move_mount", "open_tree", "mount_setattr", "open_by_handle_at"),
    "kernel modules, kexec, reboot, swap": (
        "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot",
        "swapon", "swapoff"),
    "the machine's clock, names, accounting and log": (
        "settimeofday", "clock_settime", "clock_adjtime", "sethostname", "setdomainname", "acct",
        "quotactl", "quotactl_fd", "syslog", "vhangup", "fanotify_init", "lookup_dcookie"),
    "port I/O and obsolete calls": (
        "iopl", "ioperm", "uselib", "ustat", "sysfs", "_sysctl", "nfsservctl", "vm86", "vm86old",
        "create_module", "get_kernel_syms", "query_module"),
}
"""The calls refused with ``EPERM``, by what they reach (names as libseccomp knows them;
those this architecture does not have are skipped)."""

NAMESPACE_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
"""``clone`` with any of CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET
is refused too (``EPERM``)."""
REFUSED_SOCKETS = {"AF_ALG": 38, "AF_VSOCK": 40}
"""``socket()`` families refused (``EPERM``): the kernel's crypto API, and the host's
hypervisor sockets (not confined by a network namespace)."""
NOT_IMPLEMENTED = ("clone3",)
"""Answered ``ENOSYS`` (as Docker does): its flags are behind a pointer no filter can
read, and the C library then falls back to ``clone``, which the filter checks."""


@dataclass(frozen=True)
class SyscallFilter:
    """The compiled filter, or why there is none."""

    bpf: bytes = b""
    """The BPF program (``struct sock_filter`` entries), as libseccomp exports it."""
    refused: tuple[str, ...] = ()
    """The names of the refused calls this architecture has."""
    missing: str | None = None
    """Why no filter could be built (None: it was)."""

    def describe(self) -> str:
        """For logs and ``describe()``: what the filter does, or why there is none."""
        if self.missing is not None:
            return f"NOT FILTERED ({self.missing})"
        return (f"seccomp: {len(self.refused)} calls and namespace flags of clone refused "
                "with EPERM (docs/security.md)")


@functools.lru_cache(maxsize=1)
def syscall_filter() -> SyscallFilter:
    """The filter for this machine's architecture, compiled once (under a millisecond)."""
    try:
        import pyseccomp
    except (ImportError, RuntimeError, OSError) as exc:  # RuntimeError: libseccomp not found
        reason = f"libseccomp is not usable here ({exc}); install libseccomp2 and pyseccomp"
        log.warning("sandboxed kernels run without a system-call filter: %s", reason)
        return SyscallFilter(missing=reason)
    try:
        return _compile(pyseccomp)
    except OSError as exc:
        log.warning("sandboxed kernels run without a system-call filter: %s", exc)
        return SyscallFilter(missing=f"libseccomp could not build the filter: {exc}")


def _compile(pyseccomp: Any) -> SyscallFilter:
    rules = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
    # Calls of another ABI (i386 through int 0x80, x32) are refused whole: nothing here
    # makes them, and the filter's rules are written for the native numbers.
    rules.set_attr(pyseccomp.Attr.ACT_BADARCH, pyseccomp.ERRNO(errno.EPERM))
    refused = []
    for name in (name for group in REFUSED.values() for name in group):
        if pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name) < 0:
            continue  # not a call of this architecture (vm86 on x86-64, say)
        rules.add_rule(pyseccomp.ERRNO(errno.EPERM), name)
        refused.append(name)
    for name in NOT_IMPLEMENTED:
        rules.add_rule(pyseccomp.ERRNO(errno.ENOSYS), name)
    for bit in _bits(NAMESPACE_FLAGS):
        rules.add_rule(pyseccomp.ERRNO(errno.EPERM), "clone", pyseccomp.Arg(0, pyseccomp.MASKED_EQ, bit, bit))
    for family in REFUSED_SOCKETS.values():
        rules.add_rule(pyseccomp.ERRNO(errno.EPERM), "socket", pyseccomp.Arg(0, pyseccomp.EQ, family))
    fd = os.memfd_create("kernel-analyst-seccomp", os.MFD_CLOEXEC)
    with open(fd, "w+b") as exported:
        rules.export_bpf(exported)
        exported.seek(0)
        bpf = exported.read()
    return SyscallFilter(bpf=bpf, refused=tuple(refused))


def _bits(mask: int) -> list[int]:
    return [1 << i for i in range(mask.bit_length()) if mask >> i & 1]


@contextlib.contextmanager
def bwrap_with_filter(argv: list[str], bpf: bytes | None) -> Iterator[tuple[list[str], tuple[int, ...]]]:
    """``argv`` (a bubblewrap command) with ``--seccomp FD`` added and the descriptors to
    pass to it, for the time of the spawn; unchanged without a filter."""
    if not bpf:
        yield argv, ()
        return
    fd = os.memfd_create("kernel-analyst-seccomp")  # no CLOEXEC: bubblewrap reads it
    try:
        os.write(fd, bpf)
        os.lseek(fd, 0, os.SEEK_SET)
        yield [argv[0], "--seccomp", str(fd), *argv[1:]], (fd,)
    finally:
        os.close(fd)


__all__ = ["NAMESPACE_FLAGS", "NOT_IMPLEMENTED", "REFUSED", "REFUSED_SOCKETS", "SyscallFilter",
           "bwrap_with_filter", "syscall_filter"]
