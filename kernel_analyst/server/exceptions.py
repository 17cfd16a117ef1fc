"""Exceptions of ``kernel_analyst.server``; each carries the HTTP status it maps to::

    KernelAnalystError
    └── ServiceError              a request the service refuses (status on the class)
        ├── SessionNotFoundError  404: no such session for this tenant
        ├── SessionGoneError      410: the session's notebook is no longer available
        ├── TooManySessionsError  429: a session limit is reached (retry_after set when waiting helps)
        ├── SessionUnavailableError 503: the session is being put to sleep elsewhere; retry
        ├── NoModelError          409: ``ask`` without a configured model
        ├── BadRequestError       422: a value outside what the service accepts
        ├── PayloadTooLargeError  413: a body or upload over its limit
        ├── InvalidSessionIdError 400: a session id the service cannot use (fork)
        ├── SessionExistsError    409: a session with that id exists already (fork)
        ├── NotABranchError       409: keep or discard of a session that was not made by fork
        └── RegistryError         503: the session registry (database) failed or is unreachable

Errors from the kernel layer are mapped in ``app.py`` (unsafe file name 400, file too
large 413, kernel start failures 503, ...).
"""

from __future__ import annotations

from ..kernels import KernelAnalystError


class ServiceError(KernelAnalystError):
    """A request the service refuses; ``status`` is the HTTP status code."""

    status = 400

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class SessionNotFoundError(ServiceError):
    """No session with that id belongs to the caller (another tenant's id included)."""

    status = 404


class SessionGoneError(ServiceError):
    """The session's notebook can no longer be read (its files were removed)."""

    status = 410


class TooManySessionsError(ServiceError):
    """A session limit is reached: retry after ``retry_after`` seconds (live sessions go
    dormant when idle), or delete one; ``retry_after`` is None when waiting does not help
    (the conversations a tenant keeps)."""

    status = 429

    def __init__(self, message: str, retry_after: int | None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class SessionUnavailableError(ServiceError):
    """The session is being put to sleep by another replica (its namespace is being
    saved) for longer than a request waits; retry."""

    status = 503


class NoModelError(ServiceError):
    """``ask`` needs a model and none is configured."""

    status = 409


class BadRequestError(ServiceError):
    """A value outside what the service accepts (a timeout over the ceiling ...)."""

    status = 422


class PayloadTooLargeError(ServiceError):
    """A request body or an uploaded file is over its limit."""

    status = 413


class RegistryError(ServiceError):
    """The session registry (its database) failed or cannot be reached; retry, or check
    ``--database``."""

    status = 503


class InvalidSessionIdError(ServiceError):
    """A session id asked for (``POST /sessions/{id}/fork``) that the service cannot use."""

    status = 400


class SessionExistsError(ServiceError):
    """A session with the id asked for exists already; choose another, or leave it out."""

    status = 409


class NotABranchError(ServiceError):
    """Keep or discard asked of a session that was not made by ``fork``."""

    status = 409
