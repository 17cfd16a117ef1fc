"""Code that runs inside kernel processes, not in this one.

Each file here is run by a kernel's own interpreter, which may not have kernel_analyst
installed: they need nothing but the standard library (and IPython/ipykernel once a
kernel is built) and import nothing from the package. This process only points at them:

- ``startup.py``: run by every kernel at start (``IPKernelApp.exec_files``; a gateway
  kernel gets its text as its first cell); it defines the hidden ``_kernel_analyst``
  helper that the host's requests call;
- ``_forkkernel.py``: run as the template process that kernels are forked from, and
  by every forked kernel and checkpoint (``docs/forking.md``); the host imports only its
  wire format;
- ``egress_forwarder.py``: run inside a sandbox with a network allowlist, between the
  kernel and the egress proxy;
- ``gateway_files.py``: sent to gateway kernels (file transfer, flush budget).
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
STARTUP_FILE = HERE / "startup.py"
"""Run by every kernel at start."""
FORK_FILE = HERE / "_forkkernel.py"
"""Run as the template (``python FORK_FILE template ...``)."""
FORWARDER_FILE = HERE / "egress_forwarder.py"
"""Run inside a sandbox between the kernel and the egress proxy."""
GATEWAY_FILE = HERE / "gateway_files.py"
"""Sent to each gateway kernel."""

__all__ = ["FORK_FILE", "FORWARDER_FILE", "GATEWAY_FILE", "STARTUP_FILE"]
