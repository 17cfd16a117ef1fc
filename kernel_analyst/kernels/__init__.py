"""Live kernels: sessions, executions, the audit trail. Knows nothing about LLMs.

Three rooms, with doors one way (``docs/architecture.md`` draws the map):

- ``launch/``: where and how a kernel process lives (local, forked from a template,
  sandboxed, behind a gateway); knows nothing of conversations.
- ``conversation/``: a conversation's session: the manager, the turn, one execution in
  order, runs, checkpoints, branches, files; uses ``launch`` and ``trail``.
- ``trail/``: the audit notebook, and what is read back from it (recovery, reproduce).

Value types every room may import sit here, importing none of the rooms:
``exceptions``, ``limits`` (and ``allowlist``), ``execution``, ``endings``, ``recovery``,
``files``. Above the rooms: ``sync`` (a blocking facade), ``verify`` (re-running a
notebook), ``testing`` (fake kernels for tests), ``backends`` (earlier import paths).
"""

from .conversation import ConversationInfo, KernelSession, Run, RunStatus, SessionManager
from .endings import EndCause, KernelEnding
from .exceptions import (
    DiskQuotaError,
    FileTooLargeError,
    GatewayError,
    GatewayUserError,
    KernelAnalystError,
    KernelCrashLoopError,
    KernelStartError,
    NotebookFormatError,
    RunNotFoundError,
    SandboxUnavailableError,
    SessionBusyError,
    SessionClosedError,
    UnsafeFileNameError,
    VariableFetchError,
)
from .execution import ColumnValues, Execution, ExecutionError, VariableChanges, VariableInfo
from .files import FileInfo
from .launch import KernelBackend, KernelEnvironment, LocalBackend, RunningKernel
from .limits import Limits
from .recovery import RecoveryPolicy, RecoveryReport

__all__ = [
    "ColumnValues",
    "ConversationInfo",
    "DiskQuotaError",
    "EndCause",
    "Execution",
    "ExecutionError",
    "FileInfo",
    "FileTooLargeError",
    "GatewayError",
    "GatewayUserError",
    "KernelAnalystError",
    "KernelBackend",
    "KernelCrashLoopError",
    "KernelEnding",
    "KernelEnvironment",
    "KernelSession",
    "KernelStartError",
    "Limits",
    "LocalBackend",
    "NotebookFormatError",
    "RecoveryPolicy",
    "RecoveryReport",
    "Run",
    "RunNotFoundError",
    "RunStatus",
    "RunningKernel",
    "SandboxUnavailableError",
    "SessionBusyError",
    "SessionClosedError",
    "SessionManager",
    "UnsafeFileNameError",
    "VariableChanges",
    "VariableFetchError",
    "VariableInfo",
]
