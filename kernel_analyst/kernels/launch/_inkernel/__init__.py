"""Code that runs inside kernel processes, not in this one.

Each file here is run by a kernel's own interpreter, which may not have kernel_analyst
installed: they need nothing but the standard library (and IPython/ipykernel once a
kernel is built) and import nothing from the package. This process only points at them:

- ``startup.py`` then ``snapshots.py``: run by every kernel at start
  (``IPKernelApp.exec_files``; a gateway kernel gets their text as its first cell); they
  define the hidden ``_kernel_analyst`` helper that the host's requests call;
- ``_forkkernel/``: run as the template process that kernels are forked from
  (``python _forkkernel template ...``), and so by every forked kernel and checkpoint
  (``docs/forking.md``); the host imports only its wire format (``_forkkernel/wire.py``);
- ``egress_forwarder.py``: run inside a sandbox with a network allowlist, between the
  kernel and the egress proxy;
- ``gateway_files.py``: sent to gateway kernels (file transfer, flush budget).
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
STARTUP_FILES = (HERE / "startup.py", HERE / "snapshots.py")
"""Run by every kernel at start, in this order."""
FORK_PACKAGE = HERE / "_forkkernel"
"""Run as the template (``python FORK_PACKAGE template ...``)."""
FORWARDER_FILE = HERE / "egress_forwarder.py"
"""Run inside a sandbox between the kernel and the egress proxy."""
GATEWAY_FILE = HERE / "gateway_files.py"
"""Sent to each gateway kernel."""

KERNEL_READS = (FORK_PACKAGE, *STARTUP_FILES)
"""What a sandbox of forked kernels binds read-only: the code its kernels run."""

__all__ = ["FORK_PACKAGE", "FORWARDER_FILE", "GATEWAY_FILE", "KERNEL_READS", "STARTUP_FILES"]
