"""Exceptions of ``kernel_analyst.kernels``.

Errors in user code are not exceptions: they are data (``Execution.status == "error"``).
These are infrastructure failures, each with a message that says what to do::

    KernelAnalystError
    ├── KernelStartError          the kernel process did not start or answer in time
    │   └── KernelCrashLoopError  it keeps dying; restarts stopped
    ├── KernelConnectionError     the connection to a running kernel broke
    ├── SessionClosedError        the session or manager was closed
    ├── SessionBusyError          a background run holds the session (reads would wait for it)
    ├── RunNotFoundError          no background run by that id in the session
    ├── UnsafeFileNameError       a file name tries to leave the session directory
    ├── FileTooLargeError         an upload or download is over its limit
    ├── SandboxUnavailableError   the requested isolation level cannot be provided here
    ├── DiskQuotaError            the session directory is over its disk limit
    ├── VariableFetchError        a variable could not be returned to the host
    ├── NotebookFormatError       verify was given a file that is not a readable notebook
    └── GatewayError              a remote kernel gateway refused or did not answer
        └── GatewayUserError      it refused to start a kernel as the user it was sent
"""

from __future__ import annotations


class KernelAnalystError(Exception):
    """Base class of every infrastructure error this package raises."""


class KernelStartError(KernelAnalystError):
    """The kernel process failed to start, or did not become ready within the startup timeout."""


class KernelCrashLoopError(KernelStartError):
    """The kernel died or failed to start too many times in a row; no more restarts."""


class KernelConnectionError(KernelAnalystError):
    """The connection to a running kernel failed (a reader stopped, a send failed); the
    session replaces the kernel, so its variables are lost."""


class SessionClosedError(KernelAnalystError):
    """The session (or its manager) is closed; create a new one with ``manager.session(id)``."""


class SessionBusyError(KernelAnalystError):
    """A background run is queued or running in the session, so a call that would only
    read the kernel (variables, fetch) would wait for it: wait for the run or cancel it."""

    def __init__(self, message: str, *, run_id: str) -> None:
        super().__init__(message)
        self.run_id = run_id
        """The run that holds the session."""


class RunNotFoundError(KernelAnalystError, LookupError):
    """The session has no background run by that id (runs live in the process that
    started them; the notebook holds every cell that ran)."""


class UnsafeFileNameError(KernelAnalystError, ValueError):
    """A file name is absolute, contains ``..`` or NUL, or resolves outside the session dir."""


class FileTooLargeError(KernelAnalystError, ValueError):
    """A file is larger than the configured limit."""


class SandboxUnavailableError(KernelAnalystError):
    """The requested isolation level cannot be provided on this machine."""


class DiskQuotaError(KernelAnalystError):
    """The session directory uses more disk than ``Limits.max_disk_mb`` allows."""


class VariableFetchError(KernelAnalystError, LookupError):
    """A variable does not exist or cannot be converted to plain data within the size limit."""


class NotebookFormatError(KernelAnalystError, ValueError):
    """A file given to verify is not a readable notebook."""


class GatewayError(KernelAnalystError):
    """A remote kernel gateway could not be reached, refused the token, or failed a request."""


class GatewayUserError(GatewayError):
    """The gateway refused to start a kernel as the user it was sent (``KERNEL_USERNAME``;
    Enterprise Gateway's ``authorized_users`` / ``unauthorized_users``)."""

    def __init__(self, message: str, *, user: str | None) -> None:
        super().__init__(message)
        self.user = user
        """The ``KERNEL_USERNAME`` the start request carried (None: none was sent)."""
