"""Sessions for a front end: where kernels run, where their files go, which input files
can be read."""

from __future__ import annotations

import contextlib
import importlib
import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from ..kernels import KernelBackend, Limits, SessionManager
from ..kernels.exceptions import FileTooLargeError
from .errors import UsageError
from .settings import KernelSettings


def kernel_backend(settings: KernelSettings) -> KernelBackend | None:
    """The gateway backend for ``settings.gateway_url`` (or ``KERNEL_ANALYST_GATEWAY_URL``),
    with its kernel variables and tenant users, or None for kernels on this machine."""
    try:
        gateway = importlib.import_module("kernel_analyst.kernels.launch.gateway")
    except ImportError as exc:
        if settings.gateway_url:
            raise UsageError(f"--gateway needs remote-kernel support, which this installation lacks "
                             f"({exc})") from exc
        return None
    backend: KernelBackend | None = gateway.GatewayBackend.from_env(
        settings.gateway_url, kernel_env=settings.gateway_env, usernames=settings.gateway_users)
    if backend is None and (settings.gateway_env or settings.gateway_users):
        raise UsageError("--gateway-env and --gateway-user apply to gateway kernels: give --gateway URL "
                         "(or set KERNEL_ANALYST_GATEWAY_URL)")
    return backend


def need_file(path: Path, *, max_upload_mb: int | None = None) -> Path:
    """``path`` if it is a readable file; otherwise the OSError that says what is wrong (the
    error mapping turns it into "no such file", "is a directory", "cannot read"). With
    ``max_upload_mb``, a larger file is refused before any kernel starts, saying which flag
    raises the limit."""
    if not path.exists():
        raise FileNotFoundError(2, "No such file or directory", str(path))
    if path.is_dir():
        raise IsADirectoryError(21, "Is a directory", str(path))
    if not os.access(path, os.R_OK):
        raise PermissionError(13, "Permission denied", str(path))
    with open(path, "rb") as f:  # os.access says yes to root; the open is what counts
        f.read(1)
    size = path.stat().st_size
    if max_upload_mb is not None and size > max_upload_mb * 2**20:
        needed = -(-size // 2**20)
        raise FileTooLargeError(f"{path.name} is {size:,} bytes ({size / 2**20:,.0f} MiB); the upload limit "
                                f"is {max_upload_mb:,} MiB: raise it with --max-upload-mb {needed}")
    return path


def upload_limit_mb(settings: KernelSettings) -> int:
    """The upload limit in MiB the front end's sessions will have."""
    return settings.limits().max_upload_mb


@contextlib.contextmanager
def session_root(settings: KernelSettings) -> Iterator[Path]:
    """``settings.session_dir``, or a temporary directory removed at the end."""
    if settings.session_dir is not None:
        yield settings.session_dir
        return
    with tempfile.TemporaryDirectory(prefix="kernel-analyst-") as tmp:
        yield Path(tmp)


@contextlib.asynccontextmanager
async def open_manager(settings: KernelSettings, limits: Limits | None = None,
                       **options: Any) -> AsyncIterator[SessionManager]:
    """A started :class:`SessionManager` for ``settings`` (limits from
    :meth:`KernelSettings.limits` unless given); ``options`` go to the manager."""
    with session_root(settings) as root:
        async with SessionManager(root, limits=limits or settings.limits(), backend=kernel_backend(settings),
                                  **options) as manager:
            yield manager


__all__ = ["kernel_backend", "need_file", "open_manager", "session_root", "upload_limit_mb"]
