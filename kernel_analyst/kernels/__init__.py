"""Live kernels: sessions, executions, the audit trail. Knows nothing about LLMs."""

from .backends import KernelBackend, KernelEnvironment, LocalBackend, RunningKernel
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
from .limits import Limits
from .manager import ConversationInfo, SessionManager
from .recovery import RecoveryPolicy, RecoveryReport
from .runs import Run, RunStatus
from .session import KernelSession

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
