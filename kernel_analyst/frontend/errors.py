"""One mapping from exceptions to what a front end reports: a line, an exit code, an HTTP status.

The CLI prints :attr:`Failure.message` as one line and exits with :attr:`Failure.exit_code`;
the HTTP service answers :attr:`Failure.http_status` with the same message; the MCP server
sends it as the tool's error text when :attr:`Failure.expected` is true. The table is
searched in order, so subclasses come before their bases::

    UsageError                2 / 400  the command line was given something it cannot use
    RunFailedError            1 / 422  a run failed in a way the user can act on
    UnsafeFileNameError       1 / 400
    FileTooLargeError         1 / 413
    SessionClosedError        1 / 410
    SessionBusyError          1 / 409  a background run holds the session
    RunNotFoundError          1 / 404
    VariableFetchError        1 / 404
    DiskQuotaError            1 / 507
    KernelStartError          1 / 503  (SandboxUnavailableError, GatewayError likewise)
    GatewayUserError          1 / 403  the gateway refused the kernel's user
    an error with ``status``  1 / its status (the service's own errors)
    KernelAnalystError        1 / 503  (model configuration errors among them)
    IsADirectoryError         1 / 400
    FileNotFoundError         1 / 404
    PermissionError           1 / 403
    OSError                   1 / 500
    ValueError                1 / 422
    KeyboardInterrupt       130 / -    interrupted
    anything else             1 / 500  a bug: "internal error", the traceback with --debug
"""

from __future__ import annotations

from dataclasses import dataclass

from ..kernels import exceptions as _k

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class UsageError(_k.KernelAnalystError, ValueError):
    """A command was given arguments it cannot use (exit code 2)."""


class RunFailedError(_k.KernelAnalystError):
    """A run ended in a failure to report as one line (an EDA whose file cannot be read, an
    answer whose model could not be reached)."""


@dataclass(frozen=True)
class Failure:
    """How a front end reports one exception."""

    message: str
    """One line saying what happened and, where it can, what to do."""
    exit_code: int
    """The CLI's exit status."""
    http_status: int
    """The HTTP status the service answers."""
    expected: bool
    """True for errors a user can act on; False for a bug (worth a traceback in a log)."""


_TABLE: tuple[tuple[type[BaseException], int, int], ...] = (
    (UsageError, EXIT_USAGE, 400),
    (RunFailedError, EXIT_FAILURE, 422),
    (_k.UnsafeFileNameError, EXIT_FAILURE, 400),
    (_k.FileTooLargeError, EXIT_FAILURE, 413),
    (_k.SessionClosedError, EXIT_FAILURE, 410),
    (_k.SessionBusyError, EXIT_FAILURE, 409),
    (_k.RunNotFoundError, EXIT_FAILURE, 404),
    (_k.VariableFetchError, EXIT_FAILURE, 404),
    (_k.DiskQuotaError, EXIT_FAILURE, 507),
    (_k.KernelStartError, EXIT_FAILURE, 503),
    (_k.SandboxUnavailableError, EXIT_FAILURE, 503),
    (_k.GatewayUserError, EXIT_FAILURE, 403),
    (_k.GatewayError, EXIT_FAILURE, 503),
)
_GENERAL: tuple[tuple[type[BaseException], int, int], ...] = (
    (_k.KernelAnalystError, EXIT_FAILURE, 503),
    (IsADirectoryError, EXIT_FAILURE, 400),
    (FileNotFoundError, EXIT_FAILURE, 404),
    (PermissionError, EXIT_FAILURE, 403),
    (OSError, EXIT_FAILURE, 500),
    (ValueError, EXIT_FAILURE, 422),
)


def classify(exc: BaseException) -> Failure:
    """How to report ``exc`` (see the module's table)."""
    if isinstance(exc, KeyboardInterrupt):
        return Failure("interrupted", EXIT_INTERRUPTED, 499, True)
    for kind, exit_code, status in _TABLE:
        if isinstance(exc, kind):
            return Failure(one_line(exc), exit_code, status, True)
    status_attr = getattr(exc, "status", None)
    if isinstance(exc, _k.KernelAnalystError) and isinstance(status_attr, int):
        return Failure(one_line(exc), EXIT_FAILURE, status_attr, True)
    for kind, exit_code, status in _GENERAL:
        if isinstance(exc, kind):
            return Failure(one_line(exc), exit_code, status, True)
    detail = one_line(exc)
    return Failure(f"internal error: {type(exc).__name__}: {detail}", EXIT_FAILURE, 500, False)


def one_line(exc: BaseException) -> str:
    """The exception's message on one line; file errors say which file and what is wrong."""
    if isinstance(exc, OSError) and exc.filename and not isinstance(exc, _k.KernelAnalystError):
        return _file_error(exc)
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def _file_error(exc: OSError) -> str:
    name = exc.filename
    if isinstance(exc, FileNotFoundError):
        return f"no such file: {name}"
    if isinstance(exc, IsADirectoryError):
        return f"{name} is a directory; give a file"
    if isinstance(exc, NotADirectoryError):
        return f"{name}: a part of this path is not a directory"
    if isinstance(exc, PermissionError):
        return f"cannot read {name}: permission denied"
    reason = exc.strerror or type(exc).__name__
    return f"{name}: {reason}"


__all__ = ["EXIT_FAILURE", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "Failure", "RunFailedError",
           "UsageError", "classify", "one_line"]
